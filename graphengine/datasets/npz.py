"""Reader of the gnn-benchmark ``.npz`` files (Shchur et al., "Pitfalls of GNN evaluation").

Each file holds scipy CSR arrays ``adj_*`` (adjacency) and ``attr_*`` (features),
and ``labels``. As in PyG's ``read_npz``: features are binarized, self loops are
dropped and the graph is made undirected. The split is random but seeded, as in
the paper: 20 nodes per class for training, 30 per class for validation, the
rest for testing.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from graphengine.data.graph_store import Graph
from graphengine.datasets.dataset import GraphDataset

FILES = {
    "amazon-computers": "amazon_electronics_computers.npz",
    "amazon-photo": "amazon_electronics_photo.npz",
    "coauthor-cs": "ms_academic_cs.npz",
    "coauthor-physics": "ms_academic_phy.npz",
    "cora-full": "cora_full.npz",
}
_KEYS = ("adj_data", "adj_indices", "adj_indptr", "adj_shape", "labels")
_WHERE = "the data/npz folder of the gnn-benchmark repository (shchur/gnn-benchmark on GitHub)"


def load_npz(path: str | Path, name: str | None = None, split_seed: int = 0) -> GraphDataset:
    """Read one gnn-benchmark ``.npz`` file; ``name`` defaults to the file's stem."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"missing gnn-benchmark file '{path}': get it from {_WHERE}")
    try:
        with np.load(path, allow_pickle=False) as f:
            arrays = {key: f[key] for key in f.files if key not in ("node_names", "class_names")}
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as error:
        raise ValueError(f"corrupt gnn-benchmark file '{path}': {error}") from None
    missing = [key for key in _KEYS if key not in arrays]
    if missing:
        raise ValueError(f"'{path}' is not a gnn-benchmark file: no {missing}")

    num_nodes = int(arrays["adj_shape"][0])
    adjacency = sp.csr_matrix(
        (arrays["adj_data"], arrays["adj_indices"], arrays["adj_indptr"]),
        shape=tuple(arrays["adj_shape"]),
    )
    adjacency = (adjacency + adjacency.T).tocsc()
    adjacency.setdiag(0)
    adjacency.eliminate_zeros()
    adjacency.sort_indices()

    if "attr_data" in arrays:
        features = sp.csr_matrix(
            (arrays["attr_data"], arrays["attr_indices"], arrays["attr_indptr"]),
            shape=tuple(arrays["attr_shape"]),
        )
        x = (features.toarray() > 0).astype(np.float32)
    else:
        x = np.asarray(arrays["attr_matrix"], dtype=np.float32)
    y = np.asarray(arrays["labels"], dtype=np.int64)
    if y.shape != (num_nodes,):
        raise ValueError(f"'{path}': labels of shape {y.shape}, expected ({num_nodes},)")
    train_idx, val_idx, test_idx = per_class_split(y, 20, 30, split_seed)
    return GraphDataset(
        name=name or path.stem,
        graph=Graph.from_scipy(adjacency),
        x=x,
        y=y,
        train_idx=train_idx,
        val_idx=val_idx,
        test_idx=test_idx,
        num_classes=int(y.max()) + 1,
    )


def per_class_split(
    y: np.ndarray, train_per_class: int, val_per_class: int, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A seeded split: per class, ``train_per_class`` then ``val_per_class`` random nodes;
    every other node is a test node. Returns sorted int64 id arrays."""
    rng = np.random.default_rng(seed)
    train, val = [], []
    for label in np.unique(y):
        members = rng.permutation(np.flatnonzero(y == label))
        train.append(members[:train_per_class])
        val.append(members[train_per_class : train_per_class + val_per_class])
    train_idx = np.sort(np.concatenate(train))
    val_idx = np.sort(np.concatenate(val))
    rest = np.ones(y.shape[0], dtype=bool)
    rest[train_idx] = False
    rest[val_idx] = False
    return train_idx, val_idx, np.flatnonzero(rest).astype(np.int64)
