"""Node-wise multi-hop neighbor sampling (GraphSAGE-style) over a CSC graph.

:class:`MultiHopSampler` runs the hops (seeds, frontiers, relabelling to batch-local ids);
where a hop's neighbors come from is its subclasses' one job: :class:`NeighborSampler` reads
its own CSC, :class:`graphengine.distributed.DistNeighborSampler` also asks the workers that
own the other frontier nodes, each owner running :class:`NeighborSampler`'s hop for its own.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from samplers._kernels import induced, ranges, weighted
from samplers._kernels import neighbor as kernels
from samplers._kernels.random import hop_key
from samplers._kernels.threading import numba_threads, parallel_guard
from samplers.base import BaseSampler, SamplerInput, SamplerOutput
from samplers.csc import check_csc, check_max_degree, check_node_ids, check_times, check_weights
from samplers.device import DeviceGraph, cuda_index, sample_on_device
from samplers.hop import (
    MAX_BATCH_SEEDS,
    MAX_FANOUT,
    REPEAT_MASK,
    REPEAT_SHIFT,
    EdgeBuffers,
    HopEdges,
    HopSlots,
    check_hop_size,
    grow,
    tag_repeats,
)

MIN_TABLE_BITS = 10
# Graphs up to this many nodes map a batch's node ids to local ids with an int32 array over
# all their nodes (DenseBatchNodes; 16 MiB at the limit, one per concurrent call) instead of
# a hash table sized to the batch: one read per edge where the table probes, which pays
# while the array fits the CPU cache and no longer past this size (measured on
# synthetic-products batches in commit c9615f0).
DENSE_IDS_MAX_NODES = 1 << 22
_NO_COLUMNS = np.empty(0, dtype=np.int64)


SUBGRAPH_TYPES = ("directional", "bidirectional", "induced")
TEMPORAL_STRATEGIES = ("uniform", "last")


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
        disjoint: sample each seed's tree on its own, as PyG's ``disjoint=True``: a node
            reached from two seeds is two batch nodes, each drawing from its own stream, and
            the output's ``batch`` names each node's seed.
        subgraph_type: ``"directional"`` (the sampled edges, grouped by hop),
            ``"bidirectional"`` (the sampled edges and their reverses, each pair once, sorted
            by destination then source) or ``"induced"`` (every edge of the graph between
            sampled nodes, see :meth:`induced_edges`); the last two carry no per-hop counts.
    """

    def __init__(
        self,
        num_nodes: int,
        fanouts: Sequence[int],
        replace: bool = False,
        num_threads: int | None = None,
        disjoint: bool = False,
        subgraph_type: str = "directional",
    ):
        self.fanouts = check_fanouts(fanouts)
        if num_threads is not None and (
            isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1
        ):
            raise ValueError(f"'num_threads' must be None or an int >= 1 (got {num_threads!r})")
        if subgraph_type not in SUBGRAPH_TYPES:
            raise ValueError(
                f"'subgraph_type' must be one of {SUBGRAPH_TYPES} (got {subgraph_type!r})"
            )
        self.num_threads = num_threads
        self.replace = bool(replace)
        self.disjoint = bool(disjoint)
        self.subgraph_type = subgraph_type
        self.num_nodes = int(num_nodes)
        if self.num_nodes > 1 << REPEAT_SHIFT:
            raise ValueError(f"graphs above 2**{REPEAT_SHIFT} nodes are not supported")
        self._wide_ids = self.num_nodes > np.iinfo(np.int32).max  # past int32 tables
        self._sizes = SizeHints(BatchSizes())
        self._id_maps = IdMaps.for_graph(self.num_nodes)

    @property
    def temporal(self) -> bool:
        """Whether draws are limited by time (subclasses that sample by time say so)."""
        return False

    @abstractmethod
    def sample_hop(
        self,
        frontier: np.ndarray,
        tagged: np.ndarray,
        fanout: int,
        key: np.uint64,
        slots: HopSlots,
        time_limits: np.ndarray | None = None,
    ) -> np.ndarray:
        """Sample the in-neighbors of ``frontier`` (int64 global ids).

        ``tagged`` (int64, the shape of ``frontier``) numbers each entry's random stream:
        the node's id, with a repeated seed tagged by :func:`tag_repeats` or, in disjoint
        sampling, the node's tree in the bits above ``REPEAT_SHIFT``, so that each repeat
        draws from a stream of its own. Calls ``slots.reserve(count)`` once with the hop's
        number of sampled edges and fills what it returns: the neighbors' global ids and the
        edges' ids, frontier node by frontier node (and, if it likes, ``slots.columns()``).
        Returns int64 ``[len(frontier) + 1]``: node ``i``'s edges are the slots
        ``offsets[i]:offsets[i + 1]``. ``key`` (uint64) names the hop's random streams.
        ``time_limits`` (int64, the shape of ``frontier``, temporal samplers only) is the
        latest time each entry may sample.
        """

    def hop_key(self, seed: int, hop: int) -> np.uint64:
        """The key (uint64) of hop ``hop``'s random streams in the batch seeded ``seed``."""
        return hop_key(seed, hop)

    def induced_edges(
        self, keys: np.ndarray, table: np.ndarray, bits: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every edge of the graph between the batch's nodes, for ``subgraph_type='induced'``.

        ``keys`` (int64 ``[num_nodes]``) are the batch's nodes as the hash ``table`` (of
        ``2 << bits`` entries) holds them. Returns int64 ``(row, col, edge)``."""
        raise NotImplementedError(
            f"{type(self).__name__} does not build induced subgraphs; use "
            "subgraph_type='directional' or 'bidirectional'"
        )

    def seed_node_times(self, seeds: np.ndarray) -> np.ndarray | None:
        """The seeds' own node times (int64, the shape of ``seeds``), or ``None`` when the
        sampler has none (no times, or edge times only)."""
        return None

    def sample_hop_edges(
        self,
        frontier: np.ndarray,
        tagged: np.ndarray,
        fanout: int,
        key: np.uint64,
        time_limits: np.ndarray | None = None,
    ) -> HopEdges:
        """One hop on its own, outside a batch: :meth:`sample_hop`'s draws for ``frontier``
        (arguments as there), returned as :class:`HopEdges`. A partition's owner runs this
        for the nodes other workers ask it for."""
        buffers = EdgeBuffers(0)
        offsets = self.sample_hop(frontier, tagged, fanout, key, HopSlots(buffers, 0), time_limits)
        return buffers.hop_edges(offsets)

    def _batch_nodes(self, disjoint: bool, sizes: BatchSizes) -> BatchNodes | DenseBatchNodes:
        """An empty batch's node ids and their map to local ids, with buffers sized as
        ``sizes`` (an earlier batch's, so that one allocation usually suffices): see
        :func:`batch_nodes`."""
        dense = not disjoint and self.subgraph_type != "induced"
        wide = disjoint or self._wide_ids
        return batch_nodes(self._id_maps if dense else None, sizes.table_bits, sizes.nodes, wide)

    def seed_times(self, inputs: SamplerInput, seeds: np.ndarray) -> np.ndarray | None:
        """Each seed's time (int64 ``[batch_size]``) in temporal sampling, else ``None``."""
        return resolve_seed_times(
            inputs, self.temporal, self.seed_node_times(seeds) if self.temporal else None
        )

    def sample_from_nodes(self, inputs: SamplerInput) -> SamplerOutput:
        """Sample the multi-hop neighborhood of ``inputs.node``.

        Raises:
            ValueError: a seed id outside ``[0, num_nodes)``.
        """
        if inputs.input_type is not None:
            raise NotImplementedError(
                f"{type(self).__name__} samples homogeneous graphs; 'input_type' must be None "
                "(heterogeneous graphs: samplers.HeteroNeighborSampler)"
            )
        seeds = check_node_ids(inputs.node, self.num_nodes, "node")
        seed_time = self.seed_times(inputs, seeds)
        disjoint = self.disjoint or seed_time is not None
        batch_size = seeds.shape[0]
        if batch_size > MAX_BATCH_SEEDS:  # trees, or a seed's repeats, are numbered in 23 bits
            raise ValueError(f"a batch takes at most {MAX_BATCH_SEEDS} seeds (got {batch_size})")
        with numba_threads(self.num_threads):
            return self._sample(inputs, seeds, seed_time, disjoint)

    def _sample(
        self,
        inputs: SamplerInput,
        seeds: np.ndarray,
        seed_time: np.ndarray | None,
        disjoint: bool,
    ) -> SamplerOutput:
        """The hops from ``seeds`` (``inputs.node`` checked, int64), with buffers sized as an
        earlier call's batch (:class:`SizeHints`), to which it gives its own sizes."""
        sizes = self._sizes.take()
        batch_size = seeds.shape[0]
        # A batch node is its id, or in disjoint sampling its id and its tree (``keys``).
        keys = seeds
        if disjoint:
            keys = seeds | (np.arange(batch_size, dtype=np.int64) << REPEAT_SHIFT)
        nodes = self._batch_nodes(disjoint, sizes)
        nodes.start(keys)
        edges = EdgeBuffers(sizes.edges)

        num_sampled_nodes = [batch_size]
        num_sampled_edges = []
        frontier_start = 0
        for hop, fanout in enumerate(self.fanouts):
            frontier_keys = nodes.keys[frontier_start : nodes.count]
            time_limits = None
            if disjoint:
                frontier = frontier_keys & REPEAT_MASK
                tagged = frontier_keys
                if seed_time is not None:
                    time_limits = seed_time[frontier_keys >> REPEAT_SHIFT]
            else:
                frontier = frontier_keys
                # Only the seeds can repeat; later frontiers hold each node once.
                tagged = tag_repeats(frontier) if hop == 0 else frontier
            # The hop writes global neighbor ids into the rows; relabel maps them in place.
            slots = HopSlots(edges, frontier_start, last=hop == len(self.fanouts) - 1)
            offsets = self.sample_hop(
                frontier, tagged, fanout, self.hop_key(inputs.seed, hop), slots, time_limits
            )
            hop_row, hop_col = edges.hop_rows_and_cols()
            if not slots.columns_filled:
                with parallel_guard():
                    kernels.edge_columns(offsets, frontier_start, hop_col)
            if disjoint:  # a neighbor joins the tree of the node it was sampled for
                hop_row |= nodes.keys[hop_col] & ~REPEAT_MASK
            hop_start = nodes.count
            nodes.relabel(hop_row)
            num_sampled_nodes.append(nodes.count - hop_start)
            num_sampled_edges.append(int(offsets[-1]))
            edges.commit()
            frontier_start = hop_start

        self._sizes.give_back(BatchSizes(table_bits_for(nodes.count), nodes.count, edges.used))
        keys = nodes.keys[: nodes.count]
        if isinstance(nodes, DenseBatchNodes):  # a failed call drops its map instead
            self._id_maps.give_back(nodes)
        row, col, edge = (a[: edges.used] for a in (edges.row, edges.col, edges.edge))
        weight = None if edges.weight is None else edges.weight[: edges.used]
        if self.subgraph_type != "directional":
            if self.subgraph_type == "induced":
                row, col, edge = self.induced_edges(keys, nodes.table, nodes.bits)
            else:
                row, col, edge = merge_reverse(row, col, row, col, edge)
            weight = num_sampled_nodes = num_sampled_edges = None
        return SamplerOutput(
            node=keys & REPEAT_MASK if disjoint else keys,
            row=row,
            col=col,
            edge=edge,
            num_sampled_nodes=None if num_sampled_nodes is None else tuple(num_sampled_nodes),
            num_sampled_edges=None if num_sampled_edges is None else tuple(num_sampled_edges),
            batch_size=batch_size,
            input_id=np.asarray(inputs.input_id, dtype=np.int64),
            batch=keys >> REPEAT_SHIFT if disjoint else None,
            edge_weight=weight,
            seed_time=None if inputs.time is None else seed_time,  # as PyG: the input's
        )


def resolve_seed_times(
    inputs: SamplerInput, temporal: bool, node_times: np.ndarray | None
) -> np.ndarray | None:
    """The seeds' times for a sampler that samples by time (``temporal``): the input's
    (``inputs.time``, checked), else the seeds' own ``node_times``; ``None`` for one that
    does not, which refuses input times.

    Raises:
        ValueError: times given to a sampler without times, or none to one that samples by
            edge time only (its seeds have no times of their own).
    """
    if not temporal:
        if inputs.time is not None:
            raise ValueError(
                "the sampler was given no node or edge times, so it does not sample by time; "
                "'time' must be None"
            )
        return None
    if inputs.time is not None:
        return check_times(inputs.time, np.asarray(inputs.node).shape[0], "time")
    if node_times is None:
        raise ValueError(
            "sampling by edge time needs each seed's time: pass 'time' (the loader's 'input_time')"
        )
    return node_times


def merge_reverse(
    row: np.ndarray,
    col: np.ndarray,
    rev_row: np.ndarray,
    rev_col: np.ndarray,
    edge: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The edges ``(row, col)`` and the reverses ``(rev_col, rev_row)`` of others, each
    ``(source, destination)`` pair once, sorted by destination then source, as PyG's
    ``to_bidirectional`` gives them (int64 each). With ``edge`` (the ids of both lists, when
    the reverses are the same edges: ``rev_row is row``), a pair keeps the id of an edge
    sampled as it stands when there is one, else the id of the edge it reverses; else
    ``None``."""
    rows = np.concatenate([row, rev_col]).astype(np.int64, copy=False)
    cols = np.concatenate([col, rev_row]).astype(np.int64, copy=False)
    size = int(rows.max(initial=-1)) + 1
    _, first = np.unique(cols * size + rows, return_index=True)
    merged_edge = None if edge is None else np.concatenate([edge, edge])[first]
    return rows[first], cols[first], merged_edge


class NeighborSampler(MultiHopSampler):
    """Node-wise neighbor sampling over one CSC graph in this process: uniform, weighted or
    temporal, directional, bidirectional or induced, shared or disjoint trees.

    Uniform, without replacement (the default), every subset of a node's in-neighbors of
    the fanout's size is equally likely; a node whose in-degree is at most the fanout
    keeps all of them. With replacement each of the ``fanout`` draws is uniform over the
    in-neighbors. A fanout of ``-1`` takes all in-neighbors.

    With ``weights``, each draw is proportional to the edge's weight: independent draws
    with replacement, successive draws among the edges not yet drawn without (the law of
    ``torch.multinomial(w, k, replacement=False)``); an edge of weight 0 is never drawn.

    With ``node_time`` or ``edge_time`` (temporal sampling, as PyG's ``time_attr``), the
    trees are disjoint and a node samples only edges no later than its seed's time: edges
    whose source node's time (``node_time``), or whose own time (``edge_time``), is at most
    it. ``temporal_strategy='last'`` takes the most recent of them instead of a uniform
    choice (with weights too: the ``fanout`` most recent, less those of weight 0).

    Args:
        indptr: int64 ``[num_nodes + 1]``, CSC column pointers.
        indices: int32 or int64 ``[num_edges]``, source node of each edge, grouped
            by destination.
        fanouts: neighbors per node for each hop, ``-1`` for all.
        replace: sample with replacement.
        validate: check that ``indptr``/``indices`` form a valid CSC graph (one pass
            over the arrays; skip it only for a graph already checked: the kernels do
            not check bounds).
        num_threads, disjoint, subgraph_type: as in :class:`MultiHopSampler`.
        weights: optional float ``[num_edges]`` (CSC order), finite and ``>= 0``.
        node_time: optional integer ``[num_nodes]``, each node's time.
        edge_time: optional integer ``[num_edges]`` (CSC order), each edge's time.
        temporal_strategy: ``"uniform"`` or ``"last"``.
        device: where batches are sampled: ``"cpu"`` (the default) or a CUDA GPU
            (``"cuda"``, ``"cuda:1"``, a ``torch.device``; needs the ``numba-cuda`` package).
            On a GPU the output's ``node``, ``row``, ``col``, ``edge`` and ``batch`` are device
            arrays (torch reads them without a copy through ``__cuda_array_interface__``;
            :meth:`SamplerOutput.to_host` gives NumPy's), equal to the CPU's bit for bit.
            Weighted sampling and bidirectional or induced subgraphs run on the CPU only.
        graph_placement: where a GPU reads the graph: ``"device"`` (its memory), ``"mapped"``
            (page-locked host memory read over the bus, for graphs beyond GPU memory) or
            ``"auto"`` (the device when the graph takes at most half its free memory); see
            :class:`samplers.device.DeviceGraph`.
        device_memory: where GPU sampling calls get their stream and memory (Numba's by
            default; ``graphengine.loader.device_sampling.TorchDeviceMemory()`` shares
            torch's caching allocator, which the loaders use).

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
        disjoint: bool = False,
        subgraph_type: str = "directional",
        weights: np.ndarray | None = None,
        node_time: np.ndarray | None = None,
        edge_time: np.ndarray | None = None,
        temporal_strategy: str = "uniform",
        device=None,
        graph_placement: str = "auto",
        device_memory=None,
    ):
        if validate:
            check_csc(indptr, indices)
        super().__init__(
            int(indptr.shape[0]) - 1, fanouts, replace, num_threads, disjoint, subgraph_type
        )
        self.indptr = indptr
        self.indices = indices
        check_max_degree(indptr)
        if temporal_strategy not in TEMPORAL_STRATEGIES:
            raise ValueError(
                f"'temporal_strategy' must be one of {TEMPORAL_STRATEGIES} "
                f"(got {temporal_strategy!r})"
            )
        if node_time is not None and edge_time is not None:
            raise ValueError("give 'node_time' or 'edge_time', not both")
        num_edges = indices.shape[0]
        self.node_time = (
            None if node_time is None else check_times(node_time, self.num_nodes, "node_time")
        )
        self.edge_time = (
            None if edge_time is None else check_times(edge_time, num_edges, "edge_time")
        )
        if self.temporal and subgraph_type == "induced":
            raise ValueError(
                "temporal sampling builds no induced subgraphs (neither does PyG); use "
                "subgraph_type='directional' or 'bidirectional'"
            )
        self.temporal_strategy = temporal_strategy
        self.weights = None if weights is None else check_weights(weights, num_edges)

        # The sampler reads its own copy of the CSC, each node's edges ascending in time, when
        # that is not already the order; ``_order`` maps its positions back to the graph's.
        self._order = None
        self._times = None
        sampled_indices, sampled_weights = indices, self.weights
        if self.temporal:
            times = self.edge_time if self.edge_time is not None else self.node_time[indices]
            if not ascends_per_node(indptr, times):
                columns = np.repeat(np.arange(self.num_nodes, dtype=np.int64), np.diff(indptr))
                self._order = np.lexsort((times, columns))
                times = times[self._order]
                sampled_indices = indices[self._order]
                if sampled_weights is not None:
                    sampled_weights = sampled_weights[self._order]
            self._times = times
        self._indices = sampled_indices
        self._weights = sampled_weights
        self._cumulative = None
        if sampled_weights is not None:
            with parallel_guard():
                self._cumulative = weighted.running_sums(indptr, sampled_weights)
        self._device_graph = None
        gpu = cuda_index(device)
        if gpu is not None:
            self._device_graph = self._on_gpu(gpu, graph_placement, device_memory)

    @property
    def device(self) -> str:
        """Where batches are sampled (``"cpu"`` or ``"cuda:N"``)."""
        return "cpu" if self._device_graph is None else f"cuda:{self._device_graph.device}"

    @property
    def graph_placement(self) -> str | None:
        """Where the GPU reads the graph (``"device"`` or ``"mapped"``), ``None`` on the CPU."""
        return None if self._device_graph is None else self._device_graph.placement

    def _on_gpu(self, gpu: int, placement: str, memory) -> DeviceGraph:
        """The graph on GPU ``gpu``, for the options the GPU kernels draw as the CPU's do."""
        for refused, what in (
            (self.weights is not None, "weighted sampling ('weights')"),
            (self.subgraph_type != "directional", f"subgraph_type={self.subgraph_type!r}"),
        ):
            if refused:
                raise ValueError(
                    f"{what} is not sampled on the GPU; use device='cpu' for it, or "
                    "unweighted, directional sampling on the GPU"
                )
        return DeviceGraph(
            self.indptr, self._indices, self._times, self._order, gpu, placement, memory
        )

    def _sample(
        self,
        inputs: SamplerInput,
        seeds: np.ndarray,
        seed_time: np.ndarray | None,
        disjoint: bool,
    ) -> SamplerOutput:
        if self._device_graph is None:
            return super()._sample(inputs, seeds, seed_time, disjoint)
        last = self.temporal and self.temporal_strategy == "last"
        return sample_on_device(
            self._device_graph,
            self.fanouts,
            replace=self.replace and not last,
            keep_last=last,
            seeds=seeds,
            seed_time=seed_time,
            disjoint=disjoint,
            hop_keys=[self.hop_key(inputs.seed, hop) for hop in range(len(self.fanouts))],
            input_id=inputs.input_id,
            input_time=None if inputs.time is None else seed_time,
        )

    @property
    def temporal(self) -> bool:
        return self.node_time is not None or self.edge_time is not None

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(num_nodes={self.num_nodes}, "
            f"num_edges={self.indices.shape[0]}, fanouts={list(self.fanouts)}, "
            f"replace={self.replace})"
        )

    def seed_node_times(self, seeds: np.ndarray) -> np.ndarray | None:
        return None if self.node_time is None else self.node_time[seeds]

    def sample_hop(
        self,
        frontier: np.ndarray,
        tagged: np.ndarray,
        fanout: int,
        key: np.uint64,
        slots: HopSlots,
        time_limits: np.ndarray | None = None,
    ) -> np.ndarray:
        guard = parallel_guard()
        if self._weights is None and time_limits is None:
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

        replace = self.replace and fanout >= 0 and self.temporal_strategy == "uniform"
        with guard:
            plan = hop_plan(self.indptr, frontier, fanout, replace)
            range_starts = plan.starts.copy()
            starts, degrees = plan.starts, plan.degrees
            if time_limits is not None:
                ranges.limit_to_time(self._times, starts, degrees, time_limits)
                if self.temporal_strategy == "last":
                    ranges.keep_latest(starts, degrees, fanout)
            if self._weights is None:
                offsets = ranges.counts_to_offsets(degrees, fanout, replace)
            else:
                positive = np.empty(frontier.shape[0], dtype=np.int64)
                offsets = ranges.weighted_offsets(
                    self._weights, starts, degrees, fanout, replace, positive
                )
        neighbors, edges = slots.reserve(int(offsets[-1]))
        with guard:
            if self._weights is None:
                kernels.hop_sample(
                    self._indices,
                    starts,
                    degrees,
                    offsets,
                    fanout,
                    replace,
                    key,
                    tagged,
                    slots.first_local,
                    neighbors,
                    edges,
                    slots.columns(),
                )
            else:
                weighted.hop_sample_weighted(
                    self._indices,
                    self._weights,
                    self._cumulative,
                    range_starts,
                    starts,
                    degrees,
                    positive,
                    offsets,
                    replace,
                    key,
                    tagged,
                    neighbors,
                    edges,
                    np.empty(0 if replace else edges.shape[0], dtype=np.float64),
                )
        if self._order is not None:
            np.take(self._order, edges, out=edges)
        return offsets

    def induced_edges(
        self, keys: np.ndarray, table: np.ndarray, bits: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every edge of the graph whose ends are both batch nodes (of one tree, when
        disjoint), grouped by destination in batch order, CSC order within: int64
        ``(row, col, edge)``, ``edge`` the CSC position."""
        shift = 64 - bits
        with parallel_guard():
            offsets = induced.induced_offsets(
                self.indptr, self.indices, keys, REPEAT_MASK, table, shift
            )
            count = int(offsets[-1])
            row, col, edge = (np.empty(count, dtype=np.int64) for _ in range(3))
            induced.induced_fill(
                self.indptr, self.indices, keys, REPEAT_MASK, table, shift, offsets, row, col, edge
            )
        return row, col, edge


def ascends_per_node(indptr: np.ndarray, times: np.ndarray) -> bool:
    """Whether ``times`` (CSC order) ascend (non-strictly) within every node's edges."""
    if times.shape[0] < 2:
        return True
    falls = np.diff(times) < 0
    boundaries = indptr[1:-1] - 1
    falls[boundaries[(boundaries >= 0) & (boundaries < falls.shape[0])]] = False
    return not falls.any()


class _BatchKeys(ABC):
    """What both maps of a batch's nodes share: ``keys`` (int64, the first ``count`` used) in
    local-id order, with room for ``nodes_hint`` to start with; subclasses map keys to local
    ids (:meth:`_map_seeds`, :meth:`_map_rows`)."""

    def __init__(self, nodes_hint: int):
        self.keys = np.empty(nodes_hint, dtype=np.int64)
        self.count = 0

    def start(self, keys: np.ndarray) -> None:
        """The seeds (int64 keys), local ids ``0..len(keys) - 1`` (a repeated seed maps to
        its first)."""
        self.count = keys.shape[0]
        self.keys = np.empty(max(self.keys.shape[0], self.count), dtype=np.int64)
        self.keys[: self.count] = keys
        self._map_seeds()

    def relabel(self, rows: np.ndarray) -> None:
        """Map ``rows`` (int64 keys) to local ids in place, appending the new ones in order of
        first appearance."""
        self.keys = grow(self.keys, self.count, self.count + rows.shape[0])
        self._map_rows(rows)

    @abstractmethod
    def _map_seeds(self) -> None:
        """Give the seeds just stored their local ids."""

    @abstractmethod
    def _map_rows(self, rows: np.ndarray) -> None:
        """Map ``rows`` to local ids in place, ``keys`` having room for all of them."""


class BatchNodes(_BatchKeys):
    """A batch's nodes of one kind (the batch, or one node type of a heterogeneous one):
    ``keys`` (int64, the first ``count`` used: node ids, with the tree above
    ``REPEAT_SHIFT`` when disjoint) in local-id order, and the open-addressing hash table
    (``2 << bits`` entries, int32 pairs unless ``wide``) that maps them to local ids, made
    when the first node arrives and grown before it passes the load limit.

    Args:
        bits_hint: log2 of the table capacity to start from (the previous batch's).
        nodes_hint: room for keys to start with (the previous batch's node count).
        wide: int64 table entries (disjoint keys, or ids past int32).
    """

    def __init__(self, bits_hint: int, nodes_hint: int, wide: bool):
        super().__init__(nodes_hint)
        self.bits = max(MIN_TABLE_BITS, bits_hint)
        self.dtype = np.int64 if wide else np.int32
        self.table: np.ndarray | None = None

    def _rebuild(self) -> None:
        self.table = np.full(2 << self.bits, kernels.EMPTY, dtype=self.dtype)
        kernels.insert_nodes(self.keys, self.count, self.table, 64 - self.bits)

    def _map_seeds(self) -> None:
        self.bits = max(self.bits, int(2 * max(self.count, 1) - 1).bit_length())
        self._rebuild()

    def _map_rows(self, rows: np.ndarray) -> None:
        if self.table is None:
            self._rebuild()
        done = 0
        while True:
            done, self.count = kernels.relabel(
                rows, done, self.table, 64 - self.bits, self.keys, self.count, rows
            )
            if done == rows.shape[0]:
                return
            self.bits += 1
            self._rebuild()


class DenseBatchNodes(_BatchKeys):
    """:class:`BatchNodes` whose map from node ids to local ids is ``ids``, an int32 array
    over all the graph's nodes (``EMPTY`` outside the batch), reused from batch to batch:
    relabelling reads one entry per edge where the hash table probes. No hash table
    (induced subgraphs need one).

    Args:
        ids: int32 ``[num_nodes]``, all ``EMPTY``.
        nodes_hint: room for keys to start with (the previous batch's node count).
    """

    def __init__(self, ids: np.ndarray, nodes_hint: int):
        super().__init__(nodes_hint)
        self.ids = ids

    def _map_seeds(self) -> None:
        kernels.insert_nodes_dense(self.keys, self.count, self.ids)

    def _map_rows(self, rows: np.ndarray) -> None:
        self.count = kernels.relabel_dense(rows, self.ids, self.keys, self.count, rows)

    def release(self) -> np.ndarray:
        """``ids``, all ``EMPTY`` again, for the next batch."""
        kernels.clear_dense(self.ids, self.keys, self.count)
        return self.ids


class BatchSizes(NamedTuple):
    """The sizes of one finished batch, the allocation hints of a later one.

    Attributes:
        table_bits: log2 of the hash-table capacity that held its nodes (it follows the
            node count, so that one huge batch does not keep every later batch on a huge
            table).
        nodes: its node count (room for keys to start with).
        edges: its edge count (room for edges to start with).
    """

    table_bits: int = MIN_TABLE_BITS
    nodes: int = 0
    edges: int = 0


class SizeHints:
    """Allocation hints handed from finished calls to later ones, as a pool: a call takes a
    record (:meth:`take`: an earlier call's, else ``default``) and gives back its own batch's
    (:meth:`give_back`). List pop and append are atomic, so concurrent calls never share a
    record and a sampler's attributes stay as its constructor set them."""

    def __init__(self, default):
        self.default = default
        self.free: list = []

    def take(self):
        try:
            return self.free.pop()
        except IndexError:
            return self.default

    def give_back(self, sizes) -> None:
        self.free.append(sizes)


class IdMaps:
    """The dense id maps of one set of ``num_nodes`` nodes (:class:`DenseBatchNodes`): int32
    arrays over all of them, all ``EMPTY``, free for the next call. Each concurrent call
    takes its own (list pop and append are atomic); a call that fails drops the one it took
    instead of giving it back half filled."""

    def __init__(self, num_nodes: int):
        self.num_nodes = num_nodes
        self.free: list[np.ndarray] = []

    @classmethod
    def for_graph(cls, num_nodes: int) -> IdMaps | None:
        """Maps for ``num_nodes`` nodes, or ``None`` above ``DENSE_IDS_MAX_NODES``."""
        return cls(num_nodes) if num_nodes <= DENSE_IDS_MAX_NODES else None

    def take(self, nodes_hint: int) -> DenseBatchNodes:
        """An empty batch over a free map (a new one when none is free)."""
        try:
            ids = self.free.pop()
        except IndexError:
            ids = np.full(self.num_nodes, kernels.EMPTY, dtype=np.int32)
        return DenseBatchNodes(ids, nodes_hint)

    def give_back(self, nodes: DenseBatchNodes) -> None:
        """``nodes``' map, cleared, for the next call."""
        self.free.append(nodes.release())


def batch_nodes(
    id_maps: IdMaps | None, bits_hint: int, nodes_hint: int, wide: bool
) -> BatchNodes | DenseBatchNodes:
    """An empty batch's nodes of one kind: over a dense map from ``id_maps`` when given (the
    caller leaves them out for disjoint trees, whose keys carry the tree, and for induced
    subgraphs, which read the hash table), else over a hash table (:class:`BatchNodes`,
    ``bits_hint``, ``wide``). ``nodes_hint``: room for keys to start with."""
    if id_maps is not None:
        return id_maps.take(nodes_hint)
    return BatchNodes(bits_hint, nodes_hint, wide)


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
    """How many in-neighbors each of ``nodes`` (int64 positions into ``indptr``) gets.

    Raises:
        ValueError: ``replace`` with a fanout whose hop would pass ``MAX_HOP_EDGES``.
    """
    check_hop_size(nodes.shape[0], fanout, replace)
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


def table_bits_for(num_nodes: int) -> int:
    """log2 of the hash-table capacity that holds ``num_nodes`` below the load limit."""
    bits = MIN_TABLE_BITS
    while num_nodes >= (1 << bits) * kernels.MAX_LOAD_PERCENT // 100:
        bits += 1
    return bits


def check_fanouts(fanouts: Sequence[int], name: str = "fanouts") -> tuple[int, ...]:
    """``fanouts`` as a tuple of ints in ``[-1, MAX_FANOUT]``, or an error that calls it
    ``name``: every sampler and loader takes its fanouts through this check."""
    if isinstance(fanouts, (str, bytes)) or not isinstance(fanouts, Sequence):
        raise TypeError(f"'{name}' must be a sequence of ints (got {type(fanouts).__name__})")
    out = []
    for f in fanouts:
        if isinstance(f, bool) or not isinstance(f, (int, np.integer)) or not -1 <= f <= MAX_FANOUT:
            raise ValueError(
                f"'{name}' entries must be ints >= -1 and at most {MAX_FANOUT} (2^31 - 1) "
                f"(got {list(fanouts)!r})"
            )
        out.append(int(f))
    return tuple(out)
