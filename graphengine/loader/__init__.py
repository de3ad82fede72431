"""Loaders: how batches are built. Public stages that every loader composes, the threaded
pipeline that runs them, and the loaders themselves."""

from graphengine.loader.cluster import ClusterData, ClusterLoader
from graphengine.loader.dist_neighbor_loader import DistNeighborLoader
from graphengine.loader.link_neighbor_loader import LinkNeighborLoader
from graphengine.loader.neighbor_loader import LaborLoader, NeighborLoader
from graphengine.loader.pipeline import Pipeline, Stage
from graphengine.loader.saint import (
    GraphSAINTEdgeSampler,
    GraphSAINTNodeSampler,
    GraphSAINTRandomWalkSampler,
    GraphSAINTSampler,
)
from graphengine.loader.seeds import BatchRequest, SeedBatches
from graphengine.loader.stages import (
    CopyToDevice,
    GatherFeatures,
    InWorkerThreads,
    SampleNodes,
    Transform,
)

__all__ = [
    "BatchRequest",
    "ClusterData",
    "ClusterLoader",
    "CopyToDevice",
    "DistNeighborLoader",
    "GatherFeatures",
    "GraphSAINTEdgeSampler",
    "GraphSAINTNodeSampler",
    "GraphSAINTRandomWalkSampler",
    "GraphSAINTSampler",
    "InWorkerThreads",
    "LaborLoader",
    "LinkNeighborLoader",
    "NeighborLoader",
    "Pipeline",
    "SampleNodes",
    "SeedBatches",
    "Stage",
    "Transform",
]
