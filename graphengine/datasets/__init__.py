"""Datasets: the catalog, the synthetic generator and readers of real datasets' files."""

from graphengine.datasets.catalog import CATALOG, default_root, is_available, load_dataset
from graphengine.datasets.dataset import GraphDataset
from graphengine.datasets.npz import load_npz
from graphengine.datasets.planetoid import load_planetoid
from graphengine.datasets.synthetic import SyntheticSpec, generate

__all__ = [
    "CATALOG",
    "GraphDataset",
    "SyntheticSpec",
    "default_root",
    "generate",
    "is_available",
    "load_dataset",
    "load_npz",
    "load_planetoid",
]
