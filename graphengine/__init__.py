"""graphengine: mini-batch GNN training on large graphs, a drop-in for PyG's loaders."""

from graphengine.datasets import GraphDataset, load_dataset
from graphengine.graph import Graph
from graphengine.loader import NeighborLoader

__all__ = ["Graph", "GraphDataset", "NeighborLoader", "load_dataset"]
__version__ = "0.1.0"
