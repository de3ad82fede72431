"""graphengine: mini-batch GNN training on large graphs, a drop-in for PyG's loaders."""

from graphengine.datasets import GraphDataset, load_dataset
from graphengine.feature_store import FeatureStore
from graphengine.graph import Graph
from graphengine.loader import NeighborLoader
from graphengine.trainer import Trainer

__all__ = ["FeatureStore", "Graph", "GraphDataset", "NeighborLoader", "Trainer", "load_dataset"]
__version__ = "0.1.0"
