"""Uniform node-wise multi-hop neighbor sampling (GraphSAGE-style) over a CSC graph."""

from collections.abc import Sequence

import numba
import numpy as np

from samplers._kernels import neighbor as kernels
from samplers._kernels.random import MAX_BOUND, hop_key
from samplers._kernels.threading import parallel_guard
from samplers.base import BaseSampler, SamplerInput, SamplerOutput
from samplers.csc import check_csc, check_node_ids

_MIN_TABLE_BITS = 10


class NeighborSampler(BaseSampler):
    """Samples up to ``fanouts[h]`` in-neighbors per node at hop ``h``.

    Without replacement (the default) every subset of a node's in-neighbors of
    the fanout's size is equally likely; a node whose in-degree is at most the
    fanout keeps all of them. With replacement each of the ``fanout`` draws is
    uniform over the in-neighbors. A fanout of ``-1`` takes all in-neighbors.

    Args:
        indptr: int64 ``[num_nodes + 1]``, CSC column pointers.
        indices: int32 or int64 ``[num_edges]``, source node of each edge, grouped
            by destination.
        fanouts: neighbors per node for each hop, ``-1`` for all.
        replace: sample with replacement.
        validate: check that ``indptr``/``indices`` form a valid CSC graph (one pass
            over the arrays; skip it only for a graph already checked: the kernels do
            not check bounds).
        num_threads: Numba threads each call may use (``None``: Numba's default, one per
            core). A loader running ``k`` sampling threads gives each ``cores // k``, so
            that they share the machine instead of each sizing itself to it.

    Calls from several threads at once are safe: Numba runs on a thread-safe threading
    layer (``omp`` or ``tbb``), or, where only ``workqueue`` exists, calls take turns.
    """

    def __init__(
        self,
        indptr: np.ndarray,
        indices: np.ndarray,
        fanouts: Sequence[int],
        replace: bool = False,
        validate: bool = True,
        num_threads: int | None = None,
    ):
        if validate:
            check_csc(indptr, indices)
        self.fanouts = check_fanouts(fanouts)
        if num_threads is not None and (
            isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1
        ):
            raise ValueError(f"'num_threads' must be None or an int >= 1 (got {num_threads!r})")
        self.num_threads = num_threads
        self.replace = bool(replace)
        self.indptr = indptr
        self.indices = indices
        self.num_nodes = int(indptr.shape[0]) - 1
        if self.num_nodes > 0:
            largest = int(np.diff(indptr).max())
            if largest > MAX_BOUND:
                raise ValueError(f"in-degrees above {MAX_BOUND} are not supported (got {largest})")
        # Buffer sizes of the last batch: hints only, so races between threads are harmless.
        # The table's hint follows the last batch's node count, so one huge batch does not
        # keep every later batch on a huge table.
        self._table_dtype = np.int32 if self.num_nodes <= np.iinfo(np.int32).max else np.int64
        self._table_bits = _MIN_TABLE_BITS
        self._nodes = 0
        self._edges = 0

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(num_nodes={self.num_nodes}, "
            f"num_edges={self.indices.shape[0]}, fanouts={list(self.fanouts)}, "
            f"replace={self.replace})"
        )

    def sample_from_nodes(self, inputs: SamplerInput) -> SamplerOutput:
        """Sample the multi-hop neighborhood of ``inputs.node``.

        Raises:
            ValueError: a seed id outside ``[0, num_nodes)``.
        """
        if inputs.time is not None or inputs.input_type is not None:
            raise NotImplementedError(
                "NeighborSampler samples homogeneous graphs without time; 'time' and "
                "'input_type' must be None"
            )
        seeds = check_node_ids(inputs.node, self.num_nodes, "node")
        batch_size = seeds.shape[0]
        if self.num_threads is not None:
            numba.set_num_threads(min(self.num_threads, numba.config.NUMBA_NUM_THREADS))
        guard = parallel_guard()
        # Size the buffers like the previous batch's, so that one allocation usually suffices.
        bits = max(_MIN_TABLE_BITS, self._table_bits, int(2 * max(batch_size, 1) - 1).bit_length())
        table = np.full(2 << bits, kernels.EMPTY, dtype=self._table_dtype)
        kernels.insert_nodes(seeds, batch_size, table, 64 - bits)
        n_id = _grow(seeds, batch_size, max(self._nodes, batch_size))
        row = np.empty(self._edges, dtype=np.int64)
        col = np.empty(self._edges, dtype=np.int64)
        edge = np.empty(self._edges, dtype=np.int64)

        num_nodes = batch_size
        num_edges = 0
        num_sampled_nodes = [batch_size]
        num_sampled_edges = []
        frontier_start = 0
        for hop, fanout in enumerate(self.fanouts):
            frontier = n_id[frontier_start:num_nodes]
            starts = np.empty(frontier.shape[0], dtype=np.int64)
            degrees = np.empty(frontier.shape[0], dtype=np.int64)
            with guard:
                offsets = kernels.hop_offsets(
                    self.indptr, frontier, fanout, self.replace, starts, degrees
                )
            hop_edges = int(offsets[-1])
            end = num_edges + hop_edges
            row, col, edge = (_grow(a, num_edges, end) for a in (row, col, edge))
            hop_row = row[num_edges:end]
            # The draws write global neighbor ids into ``hop_row``; relabel maps them in place.
            with guard:
                kernels.hop_sample(
                    self.indices,
                    starts,
                    degrees,
                    offsets,
                    fanout,
                    self.replace,
                    hop_key(inputs.seed, hop),
                    frontier_start,
                    hop_row,
                    edge[num_edges:end],
                    col[num_edges:end],
                )
            n_id = _grow(n_id, num_nodes, num_nodes + hop_edges)
            hop_start = num_nodes
            done = 0
            while True:
                done, num_nodes = kernels.relabel(
                    hop_row, done, table, 64 - bits, n_id, num_nodes, hop_row
                )
                if done == hop_edges:
                    break
                bits += 1
                table = np.full(2 << bits, kernels.EMPTY, dtype=self._table_dtype)
                kernels.insert_nodes(n_id, num_nodes, table, 64 - bits)
            num_sampled_nodes.append(num_nodes - hop_start)
            num_sampled_edges.append(hop_edges)
            num_edges = end
            frontier_start = hop_start

        self._table_bits = table_bits_for(num_nodes)
        self._nodes, self._edges = num_nodes, num_edges
        return SamplerOutput(
            node=n_id[:num_nodes],
            row=row[:num_edges],
            col=col[:num_edges],
            edge=edge[:num_edges],
            num_sampled_nodes=tuple(num_sampled_nodes),
            num_sampled_edges=tuple(num_sampled_edges),
            batch_size=batch_size,
            input_id=np.asarray(inputs.input_id, dtype=np.int64),
        )


def table_bits_for(num_nodes: int) -> int:
    """log2 of the hash-table capacity that holds ``num_nodes`` below the load limit."""
    bits = _MIN_TABLE_BITS
    while num_nodes >= (1 << bits) * kernels.MAX_LOAD_PERCENT // 100:
        bits += 1
    return bits


def _grow(array: np.ndarray, used: int, needed: int) -> np.ndarray:
    """``array`` if it holds ``needed`` entries, else a larger copy of its first ``used``."""
    if array.shape[0] >= needed:
        return array
    grown = np.empty(max(needed, used + used // 2), dtype=array.dtype)
    grown[:used] = array[:used]
    return grown


def check_fanouts(fanouts: Sequence[int], name: str = "fanouts") -> tuple[int, ...]:
    """``fanouts`` as a tuple of ints ``>= -1``, or an error that calls it ``name``."""
    if isinstance(fanouts, (str, bytes)) or not isinstance(fanouts, Sequence):
        raise TypeError(f"'{name}' must be a sequence of ints (got {type(fanouts).__name__})")
    out = []
    for f in fanouts:
        if isinstance(f, bool) or not isinstance(f, (int, np.integer)) or f < -1:
            raise ValueError(f"'{name}' entries must be ints >= -1 (got {list(fanouts)!r})")
        out.append(int(f))
    return tuple(out)
