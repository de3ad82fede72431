"""Loaders: turn sampled ids into PyG ``Data`` mini-batches."""

from graphengine.loader.batch import BatchBuilder
from graphengine.loader.neighbor_loader import NeighborLoader
from graphengine.loader.seeds import BatchRequest, SeedBatches

__all__ = ["BatchBuilder", "BatchRequest", "NeighborLoader", "SeedBatches"]
