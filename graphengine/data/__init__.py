"""What a batch is read from: the CSC graph store and the feature store, and their files."""

from graphengine.data.feature_store import FeatureStore
from graphengine.data.graph_store import Graph
from graphengine.data.output_files import WriteError

__all__ = ["FeatureStore", "Graph", "WriteError"]
