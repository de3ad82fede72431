"""Reader of the Planetoid citation graphs (Cora, CiteSeer, PubMed) from their raw files.

Layout: ``<root>/<Name>/raw/ind.<name>.{x,tx,allx,y,ty,ally,graph,test.index}``, as
PyG's ``Planetoid`` expects, read in place (nothing is written). The parsing is PyG's
``torch_geometric.io.read_planetoid_data``; this module adds clear errors for missing
and corrupt files and converts the result into a :class:`GraphDataset`. The public
split: the first 20 nodes per class for training (``y``'s rows), the next 500 for
validation, the 1,000 ``test.index`` nodes for testing. CiteSeer's isolated
test-index gaps become zero rows (label 0), and self loops and repeated edges are
dropped.
"""

from __future__ import annotations

import itertools
import pickle
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from torch_geometric.io import read_planetoid_data

from graphengine.data.graph_store import Graph
from graphengine.datasets.dataset import GraphDataset

NAMES = {"cora": "Cora", "citeseer": "CiteSeer", "pubmed": "PubMed"}
PARTS = ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")
_WHERE = (
    "the 'data' folder of the Planetoid repository (kimiyoung/planetoid on GitHub), "
    "or the raw/ folder PyG's Planetoid dataset downloads"
)
# What a damaged file makes PyG's reader raise (pickle, the text parser, torch's casts).
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
    try:
        parts = {part: _read_part(raw / f"ind.{key}.{part}") for part in PARTS}
    except _CORRUPT as error:
        raise ValueError(
            f"corrupt Planetoid file among '{raw}/ind.{key}.*' ({type(error).__name__}: {error})"
        ) from None
    for part, value in parts.items():
        _check_part(raw / f"ind.{key}.{part}", value)
    try:
        data = read_planetoid_data(str(raw), key)
    except _CORRUPT as error:
        raise ValueError(
            f"corrupt Planetoid file among '{raw}/ind.{key}.*' ({type(error).__name__}: {error})"
        ) from None
    num_nodes = int(data.y.shape[0])
    try:
        graph = Graph.from_edge_index(data.edge_index, num_nodes)
    except ValueError as error:
        raise ValueError(f"corrupt Planetoid file '{raw}/ind.{key}.graph': {error}") from None
    y = data.y.numpy().astype(np.int64, copy=False)
    return GraphDataset(
        name=key,
        graph=graph,
        x=data.x.numpy().astype(np.float32, copy=False),
        y=y,
        train_idx=data.train_mask.nonzero().view(-1).numpy(),
        val_idx=data.val_mask.nonzero().view(-1).numpy(),
        test_idx=data.test_mask.nonzero().view(-1).numpy(),
        num_classes=int(y.max()) + 1,
    )


def _read_part(path: Path):
    """One raw part as PyG reads it: the test ids as an int64 array, the others unpickled."""
    if path.name.endswith(".test.index"):
        return np.loadtxt(path, dtype=np.int64, ndmin=1)
    with path.open("rb") as f, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pickles of scipy's old module names warn
        return pickle.load(f, encoding="latin1")


def _check_part(path: Path, value) -> None:
    """Refuse what PyG's reader would pass on unchecked: a sparse matrix whose index arrays
    lie outside its shape (densifying it writes outside the dense array), a negative test id
    (torch indexing wraps it around) or a negative node id in the graph (coalescing drops the
    edge). One pass over each array."""
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
        _check_sparse(path, value)


def _check_non_negative(path: Path, ids: np.ndarray) -> None:
    if ids.size and ids.min() < 0:
        raise ValueError(
            f"corrupt Planetoid file '{path}': holds node id {ids.min()}, expected ids >= 0"
        )


def _check_sparse(path: Path, matrix) -> None:
    """The index arrays of a pickled CSR/CSC/COO ``matrix`` lie within its shape."""
    if matrix.format in ("csr", "csc"):
        minor = matrix.shape[1] if matrix.format == "csr" else matrix.shape[0]
        named = {"indices": (matrix.indices, minor)}
    elif matrix.format == "coo":
        named = {"row": (matrix.row, matrix.shape[0]), "col": (matrix.col, matrix.shape[1])}
    else:
        return
    for name, (index, bound) in named.items():
        if index.size and (index.min() < 0 or index.max() >= bound):
            bad = index.min() if index.min() < 0 else index.max()
            raise ValueError(
                f"corrupt Planetoid file '{path}': a {matrix.shape} {matrix.format} matrix "
                f"whose {name} hold {bad}, outside [0, {bound})"
            )
    if matrix.format != "coo":
        try:
            matrix.check_format(full_check=True)
        except ValueError as error:
            raise ValueError(
                f"corrupt Planetoid file '{path}': a malformed {matrix.shape} {matrix.format} "
                f"matrix ({error})"
            ) from None
