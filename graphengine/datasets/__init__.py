"""Datasets: the catalog, the synthetic generators and readers of real datasets' files."""

from graphengine.datasets.catalog import (
    CATALOG,
    default_root,
    is_available,
    is_heterogeneous,
    load_dataset,
    load_hetero_dataset,
)
from graphengine.datasets.compact import CompactReport, compact_store
from graphengine.datasets.dataset import GraphDataset
from graphengine.datasets.hetero import HeteroGraphDataset, HeteroSpec, generate_hetero
from graphengine.datasets.npz import load_npz
from graphengine.datasets.planetoid import load_planetoid
from graphengine.datasets.synthetic import SyntheticSpec, generate

__all__ = [
    "CATALOG",
    "CompactReport",
    "GraphDataset",
    "HeteroGraphDataset",
    "HeteroSpec",
    "SyntheticSpec",
    "compact_store",
    "default_root",
    "generate",
    "generate_hetero",
    "is_available",
    "is_heterogeneous",
    "load_dataset",
    "load_hetero_dataset",
    "load_npz",
    "load_planetoid",
]
