"""Reader of the Planetoid citation graphs (Cora, CiteSeer, PubMed) from their raw files.

Layout: ``<root>/<Name>/raw/ind.<name>.{x,tx,allx,y,ty,ally,graph,test.index}``, as
PyG's ``Planetoid`` expects, read in place (nothing is written). The parsing is PyG's
``torch_geometric.io.read_planetoid_data``, done here on the parts as read once by
:func:`graphengine.data.pickled.load_data_pickle` (PyG's reader unpickles the files with a
plain ``pickle.load``, which runs any code a file names), with clear errors for missing and
corrupt files, into a :class:`GraphDataset`. The public
split: the first 20 nodes per class for training (``y``'s rows), the next 500 for
validation, the 1,000 ``test.index`` nodes for testing. CiteSeer's isolated
test-index gaps become zero rows (label 0), and self loops and repeated edges are
dropped.
"""

from __future__ import annotations

import itertools
import pickle
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from torch_geometric.io.planetoid import edge_index_from_dict

from graphengine.data.graph_store import Graph
from graphengine.data.pickled import load_data_pickle
from graphengine.datasets.dataset import GraphDataset

NAMES = {"cora": "Cora", "citeseer": "CiteSeer", "pubmed": "PubMed"}
PARTS = ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")
_WHERE = (
    "the 'data' folder of the Planetoid repository (kimiyoung/planetoid on GitHub), "
    "or the raw/ folder PyG's Planetoid dataset downloads"
)
FEATURES, LABELS = ("x", "tx", "allx"), ("y", "ty", "ally")
# What a damaged file makes its reading raise (pickle, the text parser, torch's casts).
_CORRUPT = (
    pickle.UnpicklingError,
    EOFError,
    ValueError,
    TypeError,
    KeyError,
    IndexError,
    AttributeError,
    RuntimeError,
)


def load_planetoid(name: str, root: str | Path) -> GraphDataset:
    """Read Planetoid dataset ``name`` (``cora``, ``citeseer`` or ``pubmed``) under ``root``.

    Returns a :class:`GraphDataset` with float32 ``x [num_nodes, num_features]``, int64
    ``y [num_nodes]``, a CSC graph of the coalesced edges (both directions) and the public
    split as sorted int64 ids.

    Raises:
        ValueError: an unknown ``name``, or a file that cannot be parsed (named).
        FileNotFoundError: a missing file (named, with where to get it).
    """
    key = name.lower()
    if key not in NAMES:
        raise ValueError(f"'name' must be one of {sorted(NAMES)} (got {name!r})")
    raw = Path(root) / NAMES[key] / "raw"
    for part in PARTS:
        path = raw / f"ind.{key}.{part}"
        if not path.is_file():
            raise FileNotFoundError(f"missing Planetoid file '{path}': get it from {_WHERE}")
    parts = {}
    for part in PARTS:
        path = raw / f"ind.{key}.{part}"
        try:
            value = _read_part(path)
        except _CORRUPT as error:
            raise ValueError(
                f"corrupt Planetoid file '{path}' ({type(error).__name__}: {error})"
            ) from None
        try:
            parts[part] = _checked_part(path, part, value)
        except (TypeError, AttributeError, IndexError, KeyError) as error:
            # A matrix or array whose pickled attributes are not what its type computes with
            # (a shape that is not a pair): its own methods fail on it.
            raise ValueError(
                f"corrupt Planetoid file '{path}' ({type(error).__name__}: {error})"
            ) from None
    try:
        x, y, train_idx, val_idx, test_idx = _nodes(key, parts)
        edge_index = edge_index_from_dict(parts["graph"], num_nodes=y.shape[0])
    except _CORRUPT as error:
        raise ValueError(
            f"corrupt Planetoid file among '{raw}/ind.{key}.*' ({type(error).__name__}: {error})"
        ) from None
    try:
        graph = Graph.from_edge_index(edge_index, y.shape[0])
    except ValueError as error:
        raise ValueError(f"corrupt Planetoid file '{raw}/ind.{key}.graph': {error}") from None
    return GraphDataset(
        name=key,
        graph=graph,
        x=x,
        y=y,
        train_idx=train_idx,
        val_idx=val_idx,
        test_idx=test_idx,
        num_classes=int(y.max()) + 1,
    )


def _nodes(key: str, parts: dict) -> tuple[np.ndarray, ...]:
    """PyG's ``read_planetoid_data`` on the parts: float32 ``x [num_nodes, num_features]``
    (``allx``'s rows, then ``tx``'s moved to the test ids), int64 ``y [num_nodes]`` (the
    one-hot rows' argmax, alike) and the split as sorted int64 ids."""
    dense = {
        part: np.asarray(value.toarray() if sp.issparse(value) else value, dtype=np.float32)
        for part, value in parts.items()
        if part in FEATURES + LABELS
    }
    test_index = parts["test.index"]
    sorted_test_index = np.sort(test_index)
    tx, ty = dense["tx"], dense["ty"]
    if key == "citeseer":
        # Isolated nodes leave gaps among CiteSeer's test ids: zero rows (label 0) for them.
        low = int(test_index.min())
        tx = np.zeros((int(test_index.max()) - low + 1, tx.shape[1]), dtype=np.float32)
        tx[sorted_test_index - low] = dense["tx"]
        ty = np.zeros((tx.shape[0], ty.shape[1]), dtype=np.float32)
        ty[sorted_test_index - low] = dense["ty"]
    x = np.concatenate([dense["allx"], tx])
    x[test_index] = x[sorted_test_index]
    y = np.concatenate([dense["ally"], ty]).argmax(axis=1).astype(np.int64)
    y[test_index] = y[sorted_test_index]
    num_train = dense["y"].shape[0]
    if num_train + 500 > y.shape[0]:
        raise ValueError(
            f"{num_train} training and 500 validation nodes but {y.shape[0]} nodes in all"
        )
    train_idx = np.arange(num_train, dtype=np.int64)
    val_idx = np.arange(num_train, num_train + 500, dtype=np.int64)
    return x, y, train_idx, val_idx, np.unique(test_index)


def _read_part(path: Path):
    """One raw part: the test ids as an int64 array, the others unpickled as data only."""
    if path.name.endswith(".test.index"):
        return np.loadtxt(path, dtype=np.int64, ndmin=1)
    return load_data_pickle(path)


def _checked_part(path: Path, part: str, value):
    """``value``, a sparse matrix built afresh from its arrays; or an error naming ``path``
    for a part of another kind than the format's (a matrix of numbers for the features and
    one-hot labels, a dict for the graph), or for what PyG's reader would pass on unchecked: a
    sparse matrix whose index arrays lie outside its shape (densifying it writes outside the
    dense array), a negative test id (indexing wraps it around) or a negative node id in the
    graph (coalescing drops the edge). One pass over each array."""
    if part in FEATURES + LABELS:
        dtype = getattr(value, "dtype", None)
        if not (sp.issparse(value) or isinstance(value, np.ndarray)) or not (
            value.ndim == 2 and (np.issubdtype(dtype, np.number) or dtype == np.bool_)
        ):
            got = type(value).__name__ + ("" if dtype is None else f" of {dtype}")
            raise ValueError(
                f"corrupt Planetoid file '{path}': holds a {got}, expected a 2-D matrix of "
                "numbers (a NumPy array or SciPy sparse matrix)"
            )
    elif part == "graph" and not isinstance(value, dict):
        raise ValueError(
            f"corrupt Planetoid file '{path}': holds a {type(value).__name__}, expected a dict "
            "of int node id -> list of int node ids"
        )
    if isinstance(value, dict):
        try:
            ids = np.fromiter(
                itertools.chain(value, itertools.chain.from_iterable(value.values())), np.int64
            )
        except (TypeError, ValueError) as error:
            raise ValueError(
                f"corrupt Planetoid file '{path}': expected a dict of int node id -> list of "
                f"int node ids ({error})"
            ) from None
        _check_non_negative(path, ids)
    elif isinstance(value, np.ndarray) and path.name.endswith(".test.index"):
        _check_non_negative(path, value)
    elif sp.issparse(value):
        return _rebuilt_sparse(path, value)
    return value


def _check_non_negative(path: Path, ids: np.ndarray) -> None:
    if ids.size and ids.min() < 0:
        raise ValueError(
            f"corrupt Planetoid file '{path}': holds node id {ids.min()}, expected ids >= 0"
        )


def _rebuilt_sparse(path: Path, matrix) -> sp.spmatrix:
    """A new CSR/CSC/COO matrix of the pickled ``matrix``'s arrays, its index arrays checked to
    lie within its shape. Only the arrays are taken: a pickle sets any attribute of the object
    it builds (``_format``, ``toarray``...), so its own methods are not trusted."""
    try:
        shape = tuple(int(size) for size in matrix._shape)
        if isinstance(matrix, sp.coo_matrix):
            arrays = {"row": matrix.row, "col": matrix.col}
            named = {"row": shape[0], "col": shape[1]}
        else:
            arrays = {"indices": matrix.indices, "indptr": matrix.indptr}
            named = {"indices": shape[1] if isinstance(matrix, sp.csr_matrix) else shape[0]}
        arrays = {name: np.asarray(array) for name, array in arrays.items()}
        data = np.asarray(matrix.data)
    except (AttributeError, TypeError, ValueError, IndexError) as error:
        raise ValueError(
            f"corrupt Planetoid file '{path}': a {type(matrix).__name__} without its arrays "
            f"({error})"
        ) from None
    fmt = type(matrix).__name__.removesuffix("_matrix")
    for name, bound in named.items():
        index = arrays[name]
        if index.size and (index.min() < 0 or index.max() >= bound):
            bad = index.min() if index.min() < 0 else index.max()
            raise ValueError(
                f"corrupt Planetoid file '{path}': a {shape} {fmt} matrix "
                f"whose {name} hold {bad}, outside [0, {bound})"
            )
    try:
        if fmt == "coo":
            return sp.coo_matrix((data, (arrays["row"], arrays["col"])), shape=shape)
        fresh = type(matrix)((data, arrays["indices"], arrays["indptr"]), shape=shape)
        fresh.check_format(full_check=True)
    except (TypeError, ValueError) as error:
        raise ValueError(
            f"corrupt Planetoid file '{path}': a malformed {shape} {fmt} matrix ({error})"
        ) from None
    return fresh
