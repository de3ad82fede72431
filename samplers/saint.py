"""GraphSAINT's node selections (Zeng et al., ICLR 2020), as PyG's ``GraphSAINT*Sampler``
draws them, and the subgraph they induce: NumPy in, NumPy out.

Each selection takes a NumPy ``Generator`` for its draws (a loader seeds one per batch), and
random walks run in Numba on counter-based streams keyed from it, so a batch depends only on
its seed.
"""

from __future__ import annotations

import numpy as np

from samplers._kernels import induced
from samplers._kernels.grouping import group_by_key
from samplers._kernels.threading import parallel_guard
from samplers._kernels.walk import random_walks
from samplers.hop import REPEAT_MASK
from samplers.neighbor import MIN_TABLE_BITS, BatchNodes

MODES = ("node", "edge", "walk")


class SaintGraph:
    """A graph's edges for GraphSAINT: ``row``/``col`` (int64 ``[num_edges]``, source and
    destination, in original edge order) and their row-major CSR (``indptr`` int64
    ``[num_nodes + 1]``; ``cols`` and ``edge_ids`` int64 ``[num_edges]``, each row's edges in
    original order).

    Args:
        edge_index: integer ``[2, num_edges]``, ids in ``[0, num_nodes)``.
        num_nodes: the graph's nodes.
    """

    def __init__(self, edge_index: np.ndarray, num_nodes: int):
        edge_index = np.asarray(edge_index)
        if edge_index.dtype.kind not in "iu":
            raise TypeError(
                f"'edge_index' must hold integer node ids (got dtype {edge_index.dtype})"
            )
        if edge_index.ndim != 2 or edge_index.shape[0] != 2:
            raise ValueError(
                f"'edge_index' must have shape [2, num_edges] (got {edge_index.shape})"
            )
        if edge_index.size and (edge_index.min() < 0 or edge_index.max() >= num_nodes):
            raise ValueError(
                f"'edge_index' holds node ids outside [0, {num_nodes}) "
                f"(from {int(edge_index.min())} to {int(edge_index.max())})"
            )
        self.num_nodes = int(num_nodes)
        self.row = edge_index[0].astype(np.int64)
        self.col = edge_index[1].astype(np.int64)
        self.indptr = np.zeros(self.num_nodes + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.row, minlength=self.num_nodes), out=self.indptr[1:])
        self.edge_ids = np.empty(self.row.shape[0], dtype=np.int64)
        group_by_key(self.row, self.indptr, self.edge_ids)
        self.cols = self.col[self.edge_ids]

    @property
    def num_edges(self) -> int:
        return int(self.row.shape[0])

    def induced(self, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every edge between ``nodes`` (int64, ascending, distinct), in CSR order over them:
        ``(row, col, edge_ids)``, int64, ``row``/``col`` positions in ``nodes``.

        The induced-subgraph kernels of the neighbor sampler do it, on this graph's CSR: each
        node's out-edges are kept when their destination is in the nodes' hash table."""
        table = BatchNodes(MIN_TABLE_BITS, 0, wide=self.num_nodes > np.iinfo(np.int32).max)
        table.start(nodes)
        shift = 64 - table.bits
        with parallel_guard():
            offsets = induced.induced_offsets(
                self.indptr, self.cols, nodes, REPEAT_MASK, table.table, shift
            )
            count = int(offsets[-1])
            local_col, local_row, position = (np.empty(count, dtype=np.int64) for _ in range(3))
            induced.induced_fill(
                self.indptr,
                self.cols,
                nodes,
                REPEAT_MASK,
                table.table,
                shift,
                offsets,
                local_col,
                local_row,
                position,
            )
        return local_row, local_col, self.edge_ids[position]


def node_selection(graph: SaintGraph, budget: int, rng: np.random.Generator) -> np.ndarray:
    """GraphSAINT's node sampler as PyG draws it: the sources of ``budget`` edges drawn
    uniformly with replacement, each node once, ascending (int64)."""
    if graph.num_edges == 0:
        return np.empty(0, dtype=np.int64)
    return np.unique(graph.row[rng.integers(0, graph.num_edges, budget)])


def edge_probabilities(graph: SaintGraph) -> np.ndarray:
    """PyG's edge-sampler weights (float64 ``[num_edges]``, summing to 1): edge ``(u, v)``
    weighs ``in_degree(u) + out_degree(v)``. (The GraphSAINT paper weighs
    ``1 / deg(u) + 1 / deg(v)``; PyG's code takes the reciprocals of its reciprocals.)"""
    in_degree = np.bincount(graph.col, minlength=graph.num_nodes)
    out_degree = np.bincount(graph.row, minlength=graph.num_nodes)
    weight = (in_degree[graph.row] + out_degree[graph.col]).astype(np.float64) + 1e-10
    return weight / weight.sum()


def cumulative_probabilities(probabilities: np.ndarray) -> np.ndarray:
    """The running sums of ``probabilities`` (float64 ``[n]``), the last scaled to exactly 1:
    what :func:`edge_selection` draws from, computed once per graph."""
    cumulative = np.cumsum(probabilities, dtype=np.float64)
    if cumulative.size:
        cumulative /= cumulative[-1]
    return cumulative


def edge_selection(
    graph: SaintGraph, budget: int, rng: np.random.Generator, cumulative: np.ndarray
) -> np.ndarray:
    """GraphSAINT's edge sampler as PyG draws it: ``budget`` edges with replacement, each in
    proportion to the probabilities whose :func:`cumulative_probabilities` are
    ``cumulative``; both ends of each, each node once, ascending (int64). The draws are
    ``rng.choice(num_edges, budget, p=probabilities)``'s, without its summing of every
    probability at each call."""
    if graph.num_edges == 0:
        return np.empty(0, dtype=np.int64)
    edges = cumulative.searchsorted(rng.random(budget), side="right")
    return np.unique(np.concatenate([graph.col[edges], graph.row[edges]]))


def walk_selection(
    graph: SaintGraph, budget: int, walk_length: int, rng: np.random.Generator
) -> np.ndarray:
    """GraphSAINT's random-walk sampler: ``budget`` walks of ``walk_length`` steps from roots
    drawn uniformly with replacement, along out-edges; every node visited, once, ascending
    (int64)."""
    start = rng.integers(0, graph.num_nodes, budget)
    walks = np.empty((budget, walk_length + 1), dtype=np.int64)
    key = np.uint64(rng.integers(0, 2**63))
    with parallel_guard():
        random_walks(graph.indptr, graph.cols, start, walk_length, key, walks)
    return np.unique(walks)
