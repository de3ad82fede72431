"""graphengine: mini-batch GNN training on large graphs, a drop-in for PyG's loaders."""

from graphengine.data.feature_store import FeatureStore
from graphengine.data.graph_store import Graph
from graphengine.datasets import GraphDataset, load_dataset
from graphengine.loader import (
    ClusterData,
    ClusterLoader,
    GraphSAINTEdgeSampler,
    GraphSAINTNodeSampler,
    GraphSAINTRandomWalkSampler,
    LaborLoader,
    LinkNeighborLoader,
    NeighborLoader,
)
from graphengine.train import TrainConfig, Trainer

__all__ = [
    "ClusterData",
    "ClusterLoader",
    "FeatureStore",
    "Graph",
    "GraphDataset",
    "GraphSAINTEdgeSampler",
    "GraphSAINTNodeSampler",
    "GraphSAINTRandomWalkSampler",
    "LaborLoader",
    "LinkNeighborLoader",
    "NeighborLoader",
    "TrainConfig",
    "Trainer",
    "load_dataset",
]
__version__ = "0.1.0"
