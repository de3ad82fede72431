"""Uniform node-wise multi-hop neighbor sampling (GraphSAGE-style) over a CSC graph.

:class:`MultiHopSampler` runs the hops (seeds, frontiers, relabelling to batch-local ids);
where a hop's neighbors come from is its subclasses' one job: :class:`NeighborSampler` reads
its own CSC, :class:`graphengine.distributed.DistNeighborSampler` also asks the workers that
own the other frontier nodes. Both draw with :func:`sample_hop`'s kernels.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import NamedTuple

import numba
import numpy as np

from samplers._kernels import neighbor as kernels
from samplers._kernels.random import MAX_BOUND, hop_key
from samplers._kernels.threading import parallel_guard
from samplers.base import BaseSampler, SamplerInput, SamplerOutput
from samplers.csc import check_csc, check_node_ids

_MIN_TABLE_BITS = 10
# Node ids lie below 2**REPEAT_SHIFT; the bits above number the repeats of a seed.
REPEAT_SHIFT = 40
REPEAT_MASK = (1 << REPEAT_SHIFT) - 1
_NO_COLUMNS = np.empty(0, dtype=np.int64)


class MultiHopSampler(BaseSampler):
    """Samples up to ``fanouts[h]`` in-neighbors per node at hop ``h``, with PyG's batch
    layout (:class:`SamplerOutput`); subclasses say where a hop's neighbors come from.

    Node ``v``'s draws at hop ``h`` come from a random stream keyed by (the batch's seed,
    ``h``, ``v``'s original id) and its in-edges are read in their original order, so a batch
    depends on neither the threads nor how the graph was cut into parts.

    Args:
        num_nodes: nodes in the whole graph (seed ids must lie in ``[0, num_nodes)``).
        fanouts: neighbors per node for each hop, ``-1`` for all.
        replace: sample with replacement.
        num_threads: Numba threads each call may use (``None``: Numba's default, one per
            core). A loader running ``k`` sampling threads gives each ``cores // k``, so
            that they share the machine instead of each sizing itself to it.
    """

    def __init__(
        self,
        num_nodes: int,
        fanouts: Sequence[int],
        replace: bool = False,
        num_threads: int | None = None,
    ):
        self.fanouts = check_fanouts(fanouts)
        if num_threads is not None and (
            isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1
        ):
            raise ValueError(f"'num_threads' must be None or an int >= 1 (got {num_threads!r})")
        self.num_threads = num_threads
        self.replace = bool(replace)
        self.num_nodes = int(num_nodes)
        if self.num_nodes > 1 << REPEAT_SHIFT:
            raise ValueError(f"graphs above 2**{REPEAT_SHIFT} nodes are not supported")
        # Buffer sizes of the last batch: hints only, so races between threads are harmless.
        # The table's hint follows the last batch's node count, so one huge batch does not
        # keep every later batch on a huge table.
        self._table_dtype = np.int32 if self.num_nodes <= np.iinfo(np.int32).max else np.int64
        self._table_bits = _MIN_TABLE_BITS
        self._nodes = 0
        self._edges = 0

    @abstractmethod
    def sample_hop(
        self,
        frontier: np.ndarray,
        tagged: np.ndarray,
        fanout: int,
        key: np.uint64,
        slots: HopSlots,
    ) -> np.ndarray:
        """Sample the in-neighbors of ``frontier`` (int64 global ids).

        ``tagged`` (int64, the shape of ``frontier``) is ``frontier`` with each repeat of a
        node tagged by :func:`tag_repeats` (only seeds repeat), so that each repeat draws from
        a stream of its own. Calls ``slots.reserve(count)`` once with the hop's number of
        sampled edges and fills what it returns: the neighbors' global ids and the edges' ids,
        frontier node by frontier node (and, if it likes, ``slots.columns()``). Returns
        int64 ``[len(frontier) + 1]``: node ``i``'s edges are the slots
        ``offsets[i]:offsets[i + 1]``. ``key`` (uint64) names the hop's random streams.
        """

    def sample_from_nodes(self, inputs: SamplerInput) -> SamplerOutput:
        """Sample the multi-hop neighborhood of ``inputs.node``.

        Raises:
            ValueError: a seed id outside ``[0, num_nodes)``.
        """
        if inputs.time is not None or inputs.input_type is not None:
            raise NotImplementedError(
                f"{type(self).__name__} samples homogeneous graphs without time; 'time' and "
                "'input_type' must be None"
            )
        seeds = check_node_ids(inputs.node, self.num_nodes, "node")
        batch_size = seeds.shape[0]
        if self.num_threads is not None:
            numba.set_num_threads(min(self.num_threads, numba.config.NUMBA_NUM_THREADS))
        # Size the buffers like the previous batch's, so that one allocation usually suffices.
        bits = max(_MIN_TABLE_BITS, self._table_bits, int(2 * max(batch_size, 1) - 1).bit_length())
        table = np.full(2 << bits, kernels.EMPTY, dtype=self._table_dtype)
        kernels.insert_nodes(seeds, batch_size, table, 64 - bits)
        n_id = _grow(seeds, batch_size, max(self._nodes, batch_size))
        edges = _EdgeBuffers(self._edges)

        num_nodes = batch_size
        num_sampled_nodes = [batch_size]
        num_sampled_edges = []
        frontier_start = 0
        for hop, fanout in enumerate(self.fanouts):
            frontier = n_id[frontier_start:num_nodes]
            # Only the seeds can repeat; later frontiers hold each node once.
            tagged = tag_repeats(frontier) if hop == 0 else frontier
            # The hop writes global neighbor ids into the rows; relabel maps them in place.
            slots = HopSlots(edges, frontier_start)
            offsets = self.sample_hop(frontier, tagged, fanout, hop_key(inputs.seed, hop), slots)
            hop_edges = int(offsets[-1])
            hop_row, hop_col = edges.hop_rows_and_cols()
            if not slots.columns_filled:
                with parallel_guard():
                    kernels.edge_columns(offsets, frontier_start, hop_col)
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
            edges.commit()
            frontier_start = hop_start

        self._table_bits = table_bits_for(num_nodes)
        self._nodes, self._edges = num_nodes, edges.used
        return SamplerOutput(
            node=n_id[:num_nodes],
            row=edges.row[: edges.used],
            col=edges.col[: edges.used],
            edge=edges.edge[: edges.used],
            num_sampled_nodes=tuple(num_sampled_nodes),
            num_sampled_edges=tuple(num_sampled_edges),
            batch_size=batch_size,
            input_id=np.asarray(inputs.input_id, dtype=np.int64),
        )


class NeighborSampler(MultiHopSampler):
    """Uniform neighbor sampling over one CSC graph in this process.

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
        num_threads: as in :class:`MultiHopSampler`.

    ``edge`` in its output is each edge's CSC position. Calls from several threads at once
    are safe: Numba runs on a thread-safe threading layer (``omp`` or ``tbb``), or, where
    only ``workqueue`` exists, calls take turns.
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
        super().__init__(int(indptr.shape[0]) - 1, fanouts, replace, num_threads)
        self.indptr = indptr
        self.indices = indices
        check_max_degree(indptr)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(num_nodes={self.num_nodes}, "
            f"num_edges={self.indices.shape[0]}, fanouts={list(self.fanouts)}, "
            f"replace={self.replace})"
        )

    def sample_hop(
        self,
        frontier: np.ndarray,
        tagged: np.ndarray,
        fanout: int,
        key: np.uint64,
        slots: HopSlots,
    ) -> np.ndarray:
        guard = parallel_guard()
        with guard:
            plan = hop_plan(self.indptr, frontier, fanout, self.replace)
        neighbors, edges = slots.reserve(plan.num_edges)
        with guard:
            hop_draw(
                self.indices,
                plan,
                fanout,
                self.replace,
                key,
                tagged,
                neighbors,
                edges,
                slots.first_local,
                slots.columns(),
            )
        return plan.offsets


class _EdgeBuffers:
    """A batch's growing ``row``/``col``/``edge`` arrays (int64): the committed hops, then
    the hop being sampled."""

    def __init__(self, capacity: int):
        self.row = np.empty(capacity, dtype=np.int64)
        self.col = np.empty(capacity, dtype=np.int64)
        self.edge = np.empty(capacity, dtype=np.int64)
        self.used = 0
        self.end = 0

    def reserve(self, count: int) -> None:
        """Room for ``count`` edges after the committed ones."""
        self.end = self.used + count
        self.row, self.col, self.edge = (
            _grow(a, self.used, self.end) for a in (self.row, self.col, self.edge)
        )

    def hop_rows_and_cols(self) -> tuple[np.ndarray, np.ndarray]:
        return self.row[self.used : self.end], self.col[self.used : self.end]

    def commit(self) -> None:
        self.used = self.end


class HopSlots:
    """Where one hop of :class:`MultiHopSampler` writes its sampled edges.

    Attributes:
        first_local: the batch-local id of the hop's first frontier node.
        columns_filled: whether the hop wrote the edges' batch-local destinations
            (:meth:`columns`); otherwise the sampler fills them from the offsets.
    """

    def __init__(self, buffers: _EdgeBuffers, first_local: int):
        self._buffers = buffers
        self.first_local = first_local
        self.columns_filled = False

    def reserve(self, count: int) -> tuple[np.ndarray, np.ndarray]:
        """Room for the hop's ``count`` edges: (neighbor ids, edge ids), int64 ``[count]``."""
        self._buffers.reserve(count)
        b = self._buffers
        return b.row[b.used : b.end], b.edge[b.used : b.end]

    def columns(self) -> np.ndarray:
        """The reserved edges' destination slots (int64, batch-local ids), for a hop that
        writes them as it draws."""
        self.columns_filled = True
        return self._buffers.col[self._buffers.used : self._buffers.end]


def tag_repeats(ids: np.ndarray) -> np.ndarray:
    """``ids`` (int64, each below ``2**REPEAT_SHIFT``) with the ``k``-th repeat of a node
    tagged ``id + (k << REPEAT_SHIFT)``: the random stream numbers of a seed list, distinct
    per entry. ``ids`` itself when no node repeats."""
    order = np.argsort(ids, kind="stable")
    ordered = ids[order]
    first = np.empty(ordered.shape[0], dtype=bool)
    first[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    if first.all():
        return ids
    position = np.arange(ordered.shape[0], dtype=np.int64)
    run_start = np.maximum.accumulate(np.where(first, position, 0))
    tagged = np.empty_like(ids)
    tagged[order] = ordered + ((position - run_start) << REPEAT_SHIFT)
    return tagged


def untag(tagged: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, repeat tags)`` of :func:`tag_repeats`' output, int64 each."""
    return tagged & REPEAT_MASK, tagged & ~REPEAT_MASK


def check_max_degree(indptr: np.ndarray) -> None:
    """Raise if an in-degree passes what the kernels' draws cover (``2**32``)."""
    if indptr.shape[0] > 1:
        largest = int(np.diff(indptr).max())
        if largest > MAX_BOUND:
            raise ValueError(f"in-degrees above {MAX_BOUND} are not supported (got {largest})")


class HopPlan(NamedTuple):
    """How one hop's sampled edges are laid out (:func:`hop_plan`).

    Attributes:
        offsets: int64 ``[n + 1]``: node ``i``'s sampled edges go to ``offsets[i]:offsets[i + 1]``.
        starts: int64 ``[n]``, each node's first CSC position.
        degrees: int64 ``[n]``, each node's in-degree.
    """

    offsets: np.ndarray
    starts: np.ndarray
    degrees: np.ndarray

    @property
    def num_edges(self) -> int:
        return int(self.offsets[-1])


def hop_plan(indptr: np.ndarray, nodes: np.ndarray, fanout: int, replace: bool) -> HopPlan:
    """How many in-neighbors each of ``nodes`` (int64 positions into ``indptr``) gets."""
    starts = np.empty(nodes.shape[0], dtype=np.int64)
    degrees = np.empty(nodes.shape[0], dtype=np.int64)
    offsets = kernels.hop_offsets(indptr, nodes, fanout, replace, starts, degrees)
    return HopPlan(offsets, starts, degrees)


def hop_draw(
    indices: np.ndarray,
    plan: HopPlan,
    fanout: int,
    replace: bool,
    key: np.uint64,
    stream_ids: np.ndarray,
    out_nbr: np.ndarray,
    out_edge: np.ndarray,
    first_local: int = 0,
    out_col: np.ndarray = _NO_COLUMNS,
) -> None:
    """Draw the in-neighbors ``plan`` lays out: neighbor ids (as ``indices`` holds them) into
    ``out_nbr`` and CSC positions into ``out_edge`` (int64 ``[plan.num_edges]`` each). Node
    ``i`` draws from the stream ``stream_ids[i]`` (int64, its original id) under ``key``;
    with ``out_col`` (int64 ``[plan.num_edges]``) its edges also get its batch-local id
    ``first_local + i`` there."""
    kernels.hop_sample(
        indices,
        plan.starts,
        plan.degrees,
        plan.offsets,
        fanout,
        replace,
        key,
        stream_ids,
        first_local,
        out_nbr,
        out_edge,
        out_col,
    )


def sample_hop(
    indptr: np.ndarray,
    indices: np.ndarray,
    nodes: np.ndarray,
    stream_ids: np.ndarray,
    fanout: int,
    replace: bool,
    key: np.uint64,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One hop of sampling for ``nodes`` (int64 positions into ``indptr``), in new arrays.

    The one call a worker makes for a hop, for its own frontier nodes and those other
    workers ask it for alike (:class:`graphengine.distributed.DistNeighborSampler`).
    Callers validate; the kernels do not check bounds.

    Returns:
        ``(offsets, neighbors, edges)``: int64 ``[n + 1]`` (node ``i``'s neighbors are
        ``offsets[i]:offsets[i + 1]``), int64 neighbor ids as ``indices`` holds them, and int64
        CSC positions of the sampled edges.
    """
    guard = parallel_guard()
    with guard:
        plan = hop_plan(indptr, nodes, fanout, replace)
        neighbors = np.empty(plan.num_edges, dtype=np.int64)
        edges = np.empty(plan.num_edges, dtype=np.int64)
        hop_draw(indices, plan, fanout, replace, key, stream_ids, neighbors, edges)
    return plan.offsets, neighbors, edges


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
