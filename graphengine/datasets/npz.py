"""Reader of the gnn-benchmark ``.npz`` files (Shchur et al., "Pitfalls of GNN evaluation").

Each file holds scipy CSR arrays ``adj_*`` (adjacency) and ``attr_*`` (features),
and ``labels``. The parsing is PyG's ``torch_geometric.io.parse_npz`` (what
``read_npz`` calls): features are binarized, self loops are dropped and the graph
is made undirected. This module opens the file itself, so that a file that is not
a gnn-benchmark archive gets a clear error, and adds a random but seeded split, as
in the paper: 20 nodes per class for training, 30 per class for validation, the
rest for testing.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
from torch_geometric.io import parse_npz
from torch_geometric.utils import sort_edge_index

from graphengine.data.compressed import check_compressed
from graphengine.data.files import check_regular_file
from graphengine.data.format import read_npz
from graphengine.data.graph_store import Graph
from graphengine.datasets.dataset import GraphDataset

FILES = {
    "amazon-computers": "amazon_electronics_computers.npz",
    "amazon-photo": "amazon_electronics_photo.npz",
    "coauthor-cs": "ms_academic_cs.npz",
    "coauthor-physics": "ms_academic_phy.npz",
    "cora-full": "cora_full.npz",
}
KEYS = (
    "adj_data",
    "adj_indices",
    "adj_indptr",
    "adj_shape",
    "attr_data",
    "attr_indices",
    "attr_indptr",
    "attr_shape",
    "labels",
)
_WHERE = "the data/npz folder of the gnn-benchmark repository (shchur/gnn-benchmark on GitHub)"


def load_npz(path: str | Path, name: str | None = None, split_seed: int = 0) -> GraphDataset:
    """Read one gnn-benchmark ``.npz`` file; ``name`` defaults to the file's stem.

    Returns a :class:`GraphDataset` with float32 ``x [num_nodes, num_features]`` of 0/1,
    int64 ``y [num_nodes]``, a CSC graph holding both directions of every edge, and the
    split of :func:`per_class_split` with ``split_seed``.

    Raises:
        FileNotFoundError: no file at ``path`` (named, with where to get it).
        ValueError: a file that is not a zip archive of the gnn-benchmark arrays, or a
            damaged one (named).
    """
    path = Path(path)
    try:
        check_regular_file(path, "gnn-benchmark file")
    except FileNotFoundError:
        raise FileNotFoundError(
            f"missing gnn-benchmark file '{path}': get it from {_WHERE}"
        ) from None
    # np.load would take a non-zip file for a pickle and advise allow_pickle=True.
    if not zipfile.is_zipfile(path):
        raise ValueError(
            f"corrupt gnn-benchmark file '{path}': not a gnn-benchmark file "
            "(expected a .npz zip archive of arrays)"
        )
    # Only the arrays parse_npz reads: the files' optional ones (node and class names,
    # idx_to_*) may hold pickled objects, which are never loaded.
    try:
        arrays = read_npz(path, KEYS)
    except ValueError as error:
        raise ValueError(f"not a gnn-benchmark file: {error}") from None
    # scipy builds these matrices unchecked and densifies them by writing at their indices:
    # a bad index or pointer would write outside the array.
    num_nodes, _ = _check_csr(arrays, "attr", path)
    if num_nodes == 0:
        raise ValueError(f"'attr_shape' in '{path}' has no rows: a gnn-benchmark file holds nodes")
    if _check_csr(arrays, "adj", path) != (num_nodes, num_nodes):
        raise ValueError(
            f"'adj_shape' in '{path}' must be ({num_nodes}, {num_nodes}), as 'attr_shape' "
            f"has {num_nodes} rows (got {tuple(arrays['adj_shape'].tolist())})"
        )
    y = arrays["labels"]
    if y.shape != (num_nodes,):
        raise ValueError(f"'{path}': labels of shape {y.shape}, expected ({num_nodes},)")
    if not np.issubdtype(y.dtype, np.integer):
        # parse_npz would truncate them to int64 without a word.
        raise ValueError(f"'labels' in '{path}' must be integer class ids (got {y.dtype})")
    if y.min() < 0:
        raise ValueError(
            f"'labels' in '{path}' holds label {y.min()}, outside [0, {int(y.max()) + 1})"
        )
    try:
        data = parse_npz(arrays)
    except (ValueError, TypeError, IndexError) as error:
        raise ValueError(f"corrupt gnn-benchmark file '{path}': {error}") from None
    y = data.y.numpy()
    # Destination-major order, so that the CSC graph needs no edge-id permutation.
    edge_index = sort_edge_index(data.edge_index, num_nodes=num_nodes, sort_by_row=False)
    try:
        graph = Graph.from_edge_index(edge_index, num_nodes)
    except ValueError as error:
        raise ValueError(f"corrupt gnn-benchmark file '{path}': {error}") from None
    train_idx, val_idx, test_idx = per_class_split(y, 20, 30, split_seed)
    return GraphDataset(
        name=name or path.stem,
        graph=graph,
        x=data.x.numpy(),
        y=y,
        train_idx=train_idx,
        val_idx=val_idx,
        test_idx=test_idx,
        num_classes=int(y.max()) + 1,
    )


def _check_csr(arrays: dict[str, np.ndarray], prefix: str, path: Path) -> tuple[int, int]:
    """Check the CSR arrays ``<prefix>_{data,indices,indptr,shape}`` in one pass over each;
    returns the shape. Raises ``ValueError`` naming the array, the file and the bad value."""
    shape, indptr = arrays[f"{prefix}_shape"], arrays[f"{prefix}_indptr"]
    indices, data = arrays[f"{prefix}_indices"], arrays[f"{prefix}_data"]
    where = f"in '{path}'"
    if shape.shape != (2,) or not np.issubdtype(shape.dtype, np.integer) or shape.min() < 0:
        raise ValueError(
            f"'{prefix}_shape' {where} must be two non-negative integers (got {shape.tolist()})"
        )
    rows, cols = (int(n) for n in shape)
    check_compressed(indptr, indices, rows, cols, lambda key: f"'{prefix}_{key}' {where}", "column")
    if data.shape != indices.shape:
        raise ValueError(
            f"'{prefix}_data' {where} must have {indices.shape[0]} entries, as "
            f"'{prefix}_indices' (got {data.shape[0] if data.ndim == 1 else data.shape})"
        )
    return rows, cols


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
