"""The graph store: a directed graph in CSC layout, in memory or memory-mapped from disk."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse as sp
import torch

from graphengine.data.arrays import as_tensor
from graphengine.data.format import load_array, read_manifest, write_manifest
from samplers import check_csc

FORMAT = "graphengine.data.graph_store"
FORMAT_VERSION = 1
_MANIFEST = "graph.json"
_INT32_MAX = np.iinfo(np.int32).max


class Graph:
    """A directed graph in CSC layout: for each destination node, its incoming neighbors.

    Attributes:
        indptr: int64 ``[num_nodes + 1]``; the in-neighbors of node ``v`` are
            ``indices[indptr[v]:indptr[v + 1]]``.
        indices: int32 ``[num_edges]`` when ids fit in int32, else int64; source node ids.
        edge_ids: optional int64 ``[num_edges]``, the id of the edge at each CSC
            position in the caller's original edge order (e.g. the column of PyG's
            ``edge_index``); ``None`` means the CSC order is the edge order.

    Construct with :meth:`from_edge_index`, :meth:`from_scipy`, :meth:`from_data`,
    or :meth:`load`; the constructor validates its arrays.
    """

    def __init__(
        self,
        indptr: np.ndarray,
        indices: np.ndarray,
        edge_ids: np.ndarray | None = None,
        validate: bool = True,
    ):
        if validate:
            check_csc(indptr, indices)
            if edge_ids is not None:
                _check_edge_ids(edge_ids, indices.shape[0])
        self.indptr = indptr
        self.indices = indices
        self.edge_ids = edge_ids
        self._path: Path | None = None

    @property
    def num_nodes(self) -> int:
        return int(self.indptr.shape[0]) - 1

    @property
    def num_edges(self) -> int:
        return int(self.indices.shape[0])

    def in_degree(self) -> np.ndarray:
        """In-degree of every node: int64 ``[num_nodes]``."""
        return np.diff(self.indptr)

    def __repr__(self) -> str:
        where = f", path='{self._path}'" if self._path is not None else ""
        return f"Graph(num_nodes={self.num_nodes}, num_edges={self.num_edges}{where})"

    @classmethod
    def from_edge_index(cls, edge_index, num_nodes: int | None = None) -> Graph:
        """Build from a ``[2, num_edges]`` integer ``edge_index`` (row = source, col = destination).

        Accepts a torch tensor or numpy array of int32 or int64; ``num_nodes`` defaults
        to ``max id + 1``. ``edge_ids`` records the original column of each edge.
        """
        if isinstance(edge_index, torch.Tensor):
            edge_index = edge_index.detach().cpu().numpy()
        edge_index = np.asarray(edge_index)
        if edge_index.ndim != 2 or edge_index.shape[0] != 2:
            raise ValueError(
                f"'edge_index' must have shape [2, num_edges] (got {edge_index.shape})"
            )
        if edge_index.dtype not in (np.int32, np.int64):
            raise TypeError(f"'edge_index' must be int32 or int64 (got {edge_index.dtype})")
        row = edge_index[0].astype(np.int64, copy=False)
        col = edge_index[1].astype(np.int64, copy=False)
        if row.size and min(row.min(), col.min()) < 0:
            raise ValueError(f"'edge_index' holds a negative node id ({min(row.min(), col.min())})")
        highest = int(max(row.max(), col.max())) if row.size else -1
        if num_nodes is None:
            num_nodes = highest + 1
        elif highest >= num_nodes:
            raise ValueError(
                f"'edge_index' holds node id {highest}, outside [0, {num_nodes}) "
                f"for num_nodes={num_nodes}"
            )
        perm = np.argsort(col, kind="stable")
        indptr = np.zeros(num_nodes + 1, dtype=np.int64)
        np.cumsum(np.bincount(col, minlength=num_nodes), out=indptr[1:])
        indices = row[perm].astype(_index_dtype(num_nodes))
        identity = bool(np.array_equal(perm, np.arange(perm.shape[0])))
        return cls(indptr, indices, None if identity else perm, validate=False)

    @classmethod
    def from_scipy(cls, matrix: sp.spmatrix | sp.sparray) -> Graph:
        """Build from a square scipy sparse matrix whose entry ``(i, j)`` is an edge ``i -> j``.

        Edges keep the matrix's CSC order; explicit zeros count as edges.
        """
        if not sp.issparse(matrix):
            raise TypeError(f"'matrix' must be a scipy sparse matrix (got {type(matrix).__name__})")
        if matrix.shape[0] != matrix.shape[1]:
            raise ValueError(f"'matrix' must be square (got shape {matrix.shape})")
        csc = sp.csc_matrix(matrix)
        num_nodes = matrix.shape[0]
        return cls(
            csc.indptr.astype(np.int64),
            csc.indices.astype(_index_dtype(num_nodes)),
            validate=False,
        )

    @classmethod
    def from_data(cls, data) -> Graph:
        """Build from a PyG ``Data`` with ``edge_index`` (its ``num_nodes`` is kept)."""
        if getattr(data, "edge_index", None) is None:
            raise ValueError("'data' has no 'edge_index'")
        return cls.from_edge_index(data.edge_index, data.num_nodes)

    def to_edge_index(self) -> torch.Tensor:
        """All edges as an int64 ``[2, num_edges]`` tensor (row = source, col = destination),
        in the original edge order."""
        col = np.repeat(np.arange(self.num_nodes, dtype=np.int64), self.in_degree())
        row = np.asarray(self.indices, dtype=np.int64)
        if self.edge_ids is not None:
            order = np.empty_like(self.edge_ids)
            order[self.edge_ids] = np.arange(self.num_edges)
            row, col = row[order], col[order]
        return torch.from_numpy(np.stack([row, col]))

    def save(self, path: str | Path) -> None:
        """Write ``indptr.npy``, ``indices.npy``, maybe ``edge_ids.npy``, and ``graph.json``."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        arrays = self._arrays()
        for name, array in arrays.items():
            np.save(path / f"{name}.npy", array)
        write_manifest(
            path / _MANIFEST,
            FORMAT,
            FORMAT_VERSION,
            {
                "num_nodes": self.num_nodes,
                "num_edges": self.num_edges,
                "arrays": {name: str(array.dtype) for name, array in arrays.items()},
            },
        )

    @classmethod
    def load(cls, path: str | Path, mmap: bool = True, validate: bool = True) -> Graph:
        """Open a graph written by :meth:`save`; memory-mapped (read-only) unless ``mmap=False``.

        Raises:
            FileNotFoundError: no such directory or a missing file.
            ValueError: a manifest of another format or version, or a truncated or
                mismatched array file.
        """
        path = Path(path)
        manifest = read_manifest(path, _MANIFEST, FORMAT, FORMAT_VERSION, "graph")
        num_nodes, num_edges = manifest["num_nodes"], manifest["num_edges"]
        lengths = {"indptr": num_nodes + 1, "indices": num_edges, "edge_ids": num_edges}
        arrays = {
            name: load_array(path / f"{name}.npy", dtype, (lengths[name],), mmap)
            for name, dtype in manifest["arrays"].items()
        }
        graph = cls(arrays["indptr"], arrays["indices"], arrays.get("edge_ids"), validate=validate)
        graph._path = path
        return graph

    def share_memory_(self) -> Graph:
        """Copy the arrays into shared memory (once each) so that processes started from this
        one by fork, or handed the arrays by torch.multiprocessing, see one copy."""
        for name, array in self._arrays().items():
            setattr(self, name, as_tensor(array).share_memory_().numpy())
        return self

    def __reduce__(self):
        if self._path is not None and isinstance(self.indices, np.memmap):
            return (Graph.load, (self._path, True, False))
        return (Graph, (self.indptr, self.indices, self.edge_ids, False))

    def _arrays(self) -> dict[str, np.ndarray]:
        arrays = {"indptr": self.indptr, "indices": self.indices}
        if self.edge_ids is not None:
            arrays["edge_ids"] = self.edge_ids
        return arrays


def _index_dtype(num_nodes: int) -> type:
    return np.int32 if num_nodes <= _INT32_MAX else np.int64


def _check_edge_ids(edge_ids: np.ndarray, num_edges: int) -> None:
    if not isinstance(edge_ids, np.ndarray) or edge_ids.dtype != np.int64 or edge_ids.ndim != 1:
        raise TypeError("'edge_ids' must be a 1-D int64 numpy array")
    if edge_ids.shape[0] != num_edges:
        raise ValueError(
            f"'edge_ids' must have one entry per edge ({num_edges}), got {edge_ids.shape[0]}"
        )
