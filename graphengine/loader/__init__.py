"""Loaders: how batches are built. Each loader turns its PyG-style arguments into a typed
:class:`SamplingConfig` and :class:`LoadingConfig`, then composes seeds -> stages (the
public stages below) that the threaded pipeline runs."""

from graphengine.loader.cluster import ClusterData, ClusterLoader
from graphengine.loader.config import LoadingConfig, SamplingConfig
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
    "LoadingConfig",
    "NeighborLoader",
    "Pipeline",
    "SampleNodes",
    "SamplingConfig",
    "SeedBatches",
    "Stage",
    "Transform",
]
