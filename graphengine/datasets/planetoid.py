"""Reader of the Planetoid citation graphs (Cora, CiteSeer, PubMed) from their raw files.

Layout: ``<root>/<Name>/raw/ind.<name>.{x,tx,allx,y,ty,ally,graph,test.index}``, as
PyG's ``Planetoid`` expects, read in place (nothing is written). The public split:
the first 20 nodes per class for training (``y``'s rows), the next 500 for
validation, the 1,000 ``test.index`` nodes for testing. As in PyG, CiteSeer's
isolated test-index gaps become zero rows, and self loops and repeated edges
are dropped.
"""

from __future__ import annotations

import pickle
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from graphengine.data.graph_store import Graph
from graphengine.datasets.dataset import GraphDataset

NAMES = {"cora": "Cora", "citeseer": "CiteSeer", "pubmed": "PubMed"}
_PARTS = ("x", "tx", "allx", "y", "ty", "ally", "graph")
_WHERE = (
    "the 'data' folder of the Planetoid repository (kimiyoung/planetoid on GitHub), "
    "or the raw/ folder PyG's Planetoid dataset downloads"
)


def load_planetoid(name: str, root: str | Path) -> GraphDataset:
    """Read Planetoid dataset ``name`` (``cora``, ``citeseer`` or ``pubmed``) under ``root``."""
    key = name.lower()
    if key not in NAMES:
        raise ValueError(f"'name' must be one of {sorted(NAMES)} (got {name!r})")
    raw = Path(root) / NAMES[key] / "raw"
    parts = {part: _read_pickle(raw / f"ind.{key}.{part}") for part in _PARTS}
    test_index = _read_test_index(raw / f"ind.{key}.test.index")

    tx, ty = _dense(parts["tx"]), np.asarray(parts["ty"])
    allx, ally = _dense(parts["allx"]), np.asarray(parts["ally"])
    sorted_test = np.sort(test_index)
    if key == "citeseer":
        span = int(test_index.max() - test_index.min()) + 1
        tx_full = np.zeros((span, tx.shape[1]), dtype=tx.dtype)
        ty_full = np.zeros((span, ty.shape[1]), dtype=ty.dtype)
        tx_full[sorted_test - test_index.min()] = tx
        ty_full[sorted_test - test_index.min()] = ty
        tx, ty = tx_full, ty_full

    x = np.concatenate([allx, tx]).astype(np.float32)
    x[test_index] = x[sorted_test]
    y = np.concatenate([ally, ty]).argmax(axis=1).astype(np.int64)
    y[test_index] = y[sorted_test]
    num_nodes = y.shape[0]

    graph_dict = parts["graph"]
    src = np.fromiter((s for s, nbrs in graph_dict.items() for _ in nbrs), dtype=np.int64)
    dst = np.fromiter((d for nbrs in graph_dict.values() for d in nbrs), dtype=np.int64)
    if src.size and max(src.max(), dst.max()) >= num_nodes:
        raise ValueError(f"'{raw}/ind.{key}.graph' names a node beyond the {num_nodes} labeled")
    adjacency = sp.coo_matrix((np.ones(src.size), (src, dst)), shape=(num_nodes, num_nodes))
    adjacency = adjacency.tocsc()
    adjacency.setdiag(0)
    adjacency.eliminate_zeros()
    adjacency.sum_duplicates()
    adjacency.sort_indices()

    num_train = np.asarray(parts["y"]).shape[0]
    return GraphDataset(
        name=key,
        graph=Graph.from_scipy(adjacency),
        x=x,
        y=y,
        train_idx=np.arange(num_train, dtype=np.int64),
        val_idx=np.arange(num_train, num_train + 500, dtype=np.int64),
        test_idx=np.sort(test_index),
        num_classes=int(y.max()) + 1,
    )


def _read_pickle(path: Path):
    if not path.is_file():
        raise FileNotFoundError(f"missing Planetoid file '{path}': get it from {_WHERE}")
    try:
        with path.open("rb") as f, warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*scipy.sparse.csr.*namespace")
            return pickle.load(f, encoding="latin1")
    except (pickle.UnpicklingError, EOFError, ValueError) as error:
        raise ValueError(f"corrupt Planetoid file '{path}': {error}") from None


def _read_test_index(path: Path) -> np.ndarray:
    if not path.is_file():
        raise FileNotFoundError(f"missing Planetoid file '{path}': get it from {_WHERE}")
    try:
        return np.loadtxt(path, dtype=np.int64, ndmin=1)
    except ValueError as error:
        raise ValueError(f"corrupt Planetoid file '{path}': {error}") from None


def _dense(matrix) -> np.ndarray:
    return matrix.toarray() if sp.issparse(matrix) else np.asarray(matrix)
