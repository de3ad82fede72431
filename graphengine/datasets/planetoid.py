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

import pickle
from pathlib import Path

import numpy as np
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
