"""Node-wise neighbor sampling over a heterogeneous graph: one CSC per ``(src, relation, dst)``
edge type, node ids counted per node type, with PyG's heterogeneous ``NeighborLoader``
semantics (:class:`HeteroNeighborSampler`).

The draws of each edge type are :class:`samplers.neighbor.NeighborSampler`'s (uniform,
weighted or temporal), one instance per edge type; this module runs the hops, keeps one
relabelling hash table per node type and assembles :class:`HeteroSamplerOutput`.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np

from samplers._kernels import induced
from samplers._kernels import neighbor as kernels
from samplers._kernels.random import hop_key
from samplers._kernels.threading import numba_threads, parallel_guard
from samplers.base import BaseSampler, HeteroSamplerOutput, SamplerInput
from samplers.csc import check_node_ids, check_times, check_weights
from samplers.hop import (
    MAX_BATCH_SEEDS,
    REPEAT_MASK,
    REPEAT_SHIFT,
    EdgeBuffers,
    HopSlots,
    tag_repeats,
)
from samplers.neighbor import (
    MIN_TABLE_BITS,
    SUBGRAPH_TYPES,
    TEMPORAL_STRATEGIES,
    BatchNodes,
    DenseBatchNodes,
    IdMaps,
    NeighborSampler,
    SizeHints,
    batch_nodes,
    check_fanouts,
    merge_reverse,
    resolve_seed_times,
    table_bits_for,
)

EdgeType = tuple[str, str, str]


class _HeteroSizes(NamedTuple):
    """The sizes of one finished heterogeneous batch, the allocation hints of a later one
    (:class:`samplers.neighbor.BatchSizes`, per node type and per edge type)."""

    table_bits: dict[str, int]
    nodes: dict[str, int]
    edges: dict[EdgeType, int]


_INDEX_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))


class HeteroNeighborSampler(BaseSampler):
    """Samples up to ``fanout`` in-neighbors of each type per node and hop, over a
    heterogeneous graph, as PyG's ``NeighborSampler`` on ``HeteroData``.

    Hop ``h`` runs the edge types in sorted order (so that a graph gives the same batches
    whichever order its types are listed in): for edge type ``(src, rel, dst)``,
    each node of type ``dst`` that joined the batch at hop ``h - 1`` (the seeds at hop 0)
    draws ``num_neighbors[(src, rel, dst)][h]`` of its in-edges of that type; the sources it
    draws that are new to the batch get the next local ids of type ``src``, in order of
    first appearance, and are sampled from at hop ``h + 1``. Node ``v``'s draws for edge type
    ``t`` (its position in that order) at hop ``h`` come from a random stream keyed by (the
    batch's seed, ``h * num_edge_types + t``, ``v``'s id), so a batch depends neither on the
    threads nor on the other edge types' fanouts; with one node type and one edge type the
    batch is exactly :class:`NeighborSampler`'s for the same seed (but for the ``edge`` ids
    that PyG's bidirectional rules drop).

    Args:
        node_types: the node types (distinct strings).
        num_nodes: nodes of each node type (every type in ``node_types``).
        csc: per edge type ``(src, relation, dst)``, its in-edges as CSC arrays
            ``(indptr, indices)``: ``indptr`` int64 ``[num_nodes[dst] + 1]``, ``indices``
            int32 or int64 ``[num_edges]``, each edge's source (a local id of type ``src``),
            grouped by destination. The keys' order is the output's; types sample in sorted
            order.
        num_neighbors: neighbors per node for each hop (``-1``: all), as PyG's
            ``NumNeighbors``: one list for every edge type, or a dict from edge type
            (``(src, rel, dst)`` or ``"src__rel__dst"``) to list naming every edge type
            (``[0, ...]`` samples none). All lists have the same length, the number of hops.
        replace: sample with replacement.
        disjoint: sample each seed's tree on its own (PyG's ``disjoint=True``): a node
            reached from two seeds is two batch nodes, and the output's ``batch`` names each
            node's seed.
        subgraph_type: ``"directional"`` (the sampled edges, grouped by hop),
            ``"bidirectional"`` (PyG's ``HeteroSamplerOutput.to_bidirectional``: each edge
            type merged with its reverse type, see :meth:`sample_from_nodes`) or
            ``"induced"`` (per edge type, every edge between sampled nodes).
        weights: optional, per edge type, float ``[num_edges]`` (CSC order), finite and
            ``>= 0``: draws proportional to weight (an edge of weight 0 is never drawn);
            edge types it lacks sample uniformly.
        node_time: optional, per node type, integer ``[num_nodes[type]]``: temporal
            sampling, an edge is drawn only when its source's time is at most its tree's
            seed time; edges whose source type it lacks are not limited by time.
        edge_time: optional, per edge type, integer ``[num_edges]`` (CSC order): temporal
            sampling by each edge's own time; edge types it lacks are not limited by time.
            Give ``node_time`` or ``edge_time``, not both. Temporal sampling implies
            disjoint trees and builds no induced subgraphs (as PyG).
        temporal_strategy: ``"uniform"`` or ``"last"`` (the most recent edges).
        validate: check every CSC (one pass over its arrays); the kernels do not check
            bounds, so skip it only for graphs already checked.
        num_threads: Numba threads each call may use (``None``: Numba's default).

    Raises:
        ValueError, TypeError: inconsistent types, sizes, fanouts or options, naming the
            offending type.
    """

    def __init__(
        self,
        node_types: Sequence[str],
        num_nodes: Mapping[str, int],
        csc: Mapping[EdgeType, tuple[np.ndarray, np.ndarray]],
        num_neighbors: Sequence[int] | Mapping[EdgeType | str, Sequence[int]],
        replace: bool = False,
        disjoint: bool = False,
        subgraph_type: str = "directional",
        weights: Mapping[EdgeType, np.ndarray] | None = None,
        node_time: Mapping[str, np.ndarray] | None = None,
        edge_time: Mapping[EdgeType, np.ndarray] | None = None,
        temporal_strategy: str = "uniform",
        validate: bool = True,
        num_threads: int | None = None,
    ):
        self.node_types = _check_node_types(node_types)
        self.num_nodes = _check_num_nodes(num_nodes, self.node_types)
        if not isinstance(csc, Mapping):
            raise TypeError(
                "'csc' must be a dict from edge type to (indptr, indices) "
                f"(got {type(csc).__name__})"
            )
        pairs = {}
        for key, pair in csc.items():
            edge_type = _check_edge_type(key, self.node_types, "csc")
            if edge_type in pairs:
                raise ValueError(f"'csc' holds edge type {edge_type} twice")
            pairs[edge_type] = pair
        self.edge_types: list[EdgeType] = list(pairs)
        self._sampling_order = sorted(self.edge_types)
        self.num_neighbors = hetero_fanouts(num_neighbors, self.edge_types)
        self.num_hops = (
            len(next(iter(self.num_neighbors.values()), ()))
            if isinstance(num_neighbors, Mapping) or self.edge_types
            else len(check_fanouts(num_neighbors, "num_neighbors"))
        )
        if subgraph_type not in SUBGRAPH_TYPES:
            raise ValueError(
                f"'subgraph_type' must be one of {SUBGRAPH_TYPES} (got {subgraph_type!r})"
            )
        if temporal_strategy not in TEMPORAL_STRATEGIES:
            raise ValueError(
                f"'temporal_strategy' must be one of {TEMPORAL_STRATEGIES} "
                f"(got {temporal_strategy!r})"
            )
        if num_threads is not None and (
            isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1
        ):
            raise ValueError(f"'num_threads' must be None or an int >= 1 (got {num_threads!r})")
        if node_time is not None and edge_time is not None:
            raise ValueError("give 'node_time' or 'edge_time', not both")
        self.replace = bool(replace)
        self.disjoint = bool(disjoint)
        self.subgraph_type = subgraph_type
        self.temporal_strategy = temporal_strategy
        self.num_threads = num_threads

        graphs = {}
        for edge_type, pair in pairs.items():
            src, _, dst = edge_type
            graphs[edge_type] = _check_typed_csc(
                pair, self.num_nodes[src], self.num_nodes[dst], edge_type, validate
            )
        self.csc = graphs
        self.weights = _per_type(weights, self.edge_types, "weights", _edge_type_key)
        self.node_time = _per_type(node_time, self.node_types, "node_time")
        self.edge_time = _per_type(edge_time, self.edge_types, "edge_time", _edge_type_key)
        for node_type, times in self.node_time.items():
            self.node_time[node_type] = check_times(
                times, self.num_nodes[node_type], f"node_time[{node_type!r}]"
            )
        for edge_type, times in self.edge_time.items():
            num_edges = graphs[edge_type][1].shape[0]
            self.edge_time[edge_type] = check_times(times, num_edges, f"edge_time[{edge_type}]")
        for edge_type, values in self.weights.items():
            try:
                self.weights[edge_type] = check_weights(values, graphs[edge_type][1].shape[0])
            except (TypeError, ValueError) as error:
                raise type(error)(f"edge type {edge_type}: {error}") from None
        if self.temporal and subgraph_type == "induced":
            raise ValueError(
                "temporal sampling builds no induced subgraphs (neither does PyG); use "
                "subgraph_type='directional' or 'bidirectional'"
            )

        # One sampler per edge type draws that type's hops; its ``indices`` point into the
        # source type, which it never reads as node ids of its own, hence validate=False.
        self._samplers: dict[EdgeType, NeighborSampler] = {}
        self._timed: dict[EdgeType, bool] = {}
        for edge_type in self.edge_types:
            indptr, indices = graphs[edge_type]
            times = self.edge_time.get(edge_type)
            if times is None and edge_type[0] in self.node_time:
                times = self.node_time[edge_type[0]][indices]  # each edge: its source's time
            self._timed[edge_type] = times is not None
            self._samplers[edge_type] = NeighborSampler(
                indptr,
                indices,
                self.num_neighbors[edge_type],
                replace=self.replace,
                validate=False,
                weights=self.weights.get(edge_type),
                edge_time=times,
                temporal_strategy=temporal_strategy,
            )
        self._reverse = _reverse_plan(self.edge_types) if subgraph_type == "bidirectional" else []
        # Earlier batches' sizes, the allocation hints of later calls (one record per call).
        self._sizes = SizeHints(
            _HeteroSizes(
                dict.fromkeys(self.node_types, MIN_TABLE_BITS),
                dict.fromkeys(self.node_types, 0),
                dict.fromkeys(self.edge_types, 0),
            )
        )
        self._id_maps = {t: IdMaps.for_graph(self.num_nodes[t]) for t in self.node_types}

    @property
    def temporal(self) -> bool:
        """Whether draws are limited by time (``node_time`` or ``edge_time`` given)."""
        return bool(self.node_time) or bool(self.edge_time)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(num_nodes={self.num_nodes}, "
            f"num_edges={ {t: int(g[1].shape[0]) for t, g in self.csc.items()} }, "
            f"num_hops={self.num_hops}, replace={self.replace})"
        )

    def seed_times(self, inputs: SamplerInput, seeds: np.ndarray) -> np.ndarray | None:
        """Each seed's time (int64 ``[batch_size]``) in temporal sampling, else ``None``:
        ``inputs.time``, or the seeds' ``node_time``."""
        own = self.node_time.get(inputs.input_type) if self.temporal else None
        return resolve_seed_times(inputs, self.temporal, None if own is None else own[seeds])

    def sample_from_nodes(self, inputs: SamplerInput) -> HeteroSamplerOutput:
        """Sample the multi-hop neighborhood of ``inputs.node`` (ids of ``inputs.input_type``).

        Returns a :class:`HeteroSamplerOutput` with every node type and edge type as keys:
        ``node[t]`` int64 global ids of type ``t`` (the seeds first, for the input type),
        ``row[e]``/``col[e]``/``edge[e]`` int64 ``[num_edges_e]`` (local source, local
        destination, CSC position), ``num_sampled_nodes[t]`` (``num_hops + 1`` ints, the
        seeds' count first for the input type, 0 for the others) and
        ``num_sampled_edges[e]`` (``num_hops`` ints); ``batch[t]`` (int64, each node's seed)
        when disjoint; ``seed_time`` (int64 ``[batch_size]``) when the input gives times.

        ``subgraph_type='bidirectional'`` applies PyG's rules: an edge type ``(s, r, d)``
        (not named ``rev_*``) is merged with ``(d, rev_r, s)`` when the graph has it (which
        then gets the merged edges reversed), else with itself when ``s == d``, else with
        the only edge type from ``d`` to ``s`` if there is one; merged types hold each pair
        once, sorted by destination then source, with ``edge`` ``None``; the per-hop counts
        are ``None``. ``'induced'`` also has no per-hop counts.

        Raises:
            ValueError: no or an unknown ``input_type``, or a seed id outside
                ``[0, num_nodes[input_type])``.
        """
        input_type = inputs.input_type
        if input_type is None:
            raise ValueError(
                f"{type(self).__name__} needs the seeds' node type: 'input_type' is None "
                f"(node types: {self.node_types})"
            )
        if input_type not in self.num_nodes:
            raise ValueError(
                f"'input_type' {input_type!r} is not a node type of the graph "
                f"(node types: {self.node_types})"
            )
        seeds = check_node_ids(inputs.node, self.num_nodes[input_type], "node")
        seed_time = self.seed_times(inputs, seeds)
        return self._sample(
            {input_type: seeds}, seed_time, inputs.seed, inputs.input_id, inputs.time is not None
        )

    def sample_from_typed_nodes(
        self,
        node: Mapping[str, np.ndarray],
        seed: int,
        time: Mapping[str, np.ndarray] | None = None,
    ) -> HeteroSamplerOutput:
        """Sample the multi-hop neighborhood of seeds of several node types at once (PyG's
        ``seed_dict``, as its heterogeneous link sampling seeds it).

        Args:
            node: per node type, int64 ``[num_seeds_t]`` seed ids of that type; the types
                in this order number the disjoint trees: type ``t``'s seed ``i`` is tree
                ``i`` plus the seeds of the types before it (as pyg-lib numbers them).
            seed: the batch's random seed (as ``SamplerInput.seed``).
            time: optional, per node type of ``node`` (every one), int64 ``[num_seeds_t]``
                seed times (temporal sampling); by default each seed's own node time.

        Returns:
            A :class:`HeteroSamplerOutput` as :meth:`sample_from_nodes`', each seed type's
            node list starting with its seeds in order (``num_sampled_nodes[t][0]`` of them);
            ``input_type``, ``batch_size``, ``input_id`` (positions) and ``seed_time`` describe
            the first type of ``node``.

        Raises:
            ValueError, TypeError: no seed type, an unknown type, bad ids or times.
        """
        if not isinstance(node, Mapping) or not node:
            raise ValueError(
                "'node' must be a non-empty dict from node type to seed ids (got "
                f"{type(node).__name__})"
            )
        if time is not None and (not isinstance(time, Mapping) or set(time) != set(node)):
            raise ValueError(
                f"'time' must be None or a dict with the node types of 'node' {list(node)} "
                f"(got {list(time) if isinstance(time, Mapping) else type(time).__name__})"
            )
        seeds, times = {}, []
        for node_type, ids in node.items():
            if node_type not in self.num_nodes:
                raise ValueError(
                    f"'node' names node type {node_type!r}, which the graph does not have "
                    f"(node types: {self.node_types})"
                )
            seeds[node_type] = check_node_ids(
                ids, self.num_nodes[node_type], f"node[{node_type!r}]"
            )
            given = None if time is None else time[node_type]
            typed = SamplerInput(seeds[node_type], seeds[node_type], seed, given, node_type)
            times.append(self.seed_times(typed, seeds[node_type]))
        seed_time = None if times[0] is None else np.concatenate(times)
        first = next(iter(seeds))
        input_id = np.arange(seeds[first].shape[0], dtype=np.int64)
        out = self._sample(seeds, seed_time, seed, input_id, time is not None)
        if out.seed_time is not None:
            out = dataclasses.replace(out, seed_time=out.seed_time[: input_id.shape[0]])
        return out

    def _sample(
        self,
        seeds_by_type: dict[str, np.ndarray],
        seed_time: np.ndarray | None,
        seed: int,
        input_id: np.ndarray,
        times_given: bool,
    ) -> HeteroSamplerOutput:
        """The sample from ``seeds_by_type`` (checked int64 ids per node type, the first the
        input type), ``seed_time`` (int64 per tree, trees numbered across the types in order,
        or ``None``) and the batch seed ``seed``."""
        num_trees = sum(ids.shape[0] for ids in seeds_by_type.values())
        if num_trees > MAX_BATCH_SEEDS:  # trees, or a seed's repeats, are numbered in 23 bits
            raise ValueError(f"a batch takes at most {MAX_BATCH_SEEDS} seeds (got {num_trees})")
        with numba_threads(self.num_threads):
            return self._sample_hops(seeds_by_type, seed_time, seed, input_id, times_given)

    def _sample_hops(
        self,
        seeds_by_type: dict[str, np.ndarray],
        seed_time: np.ndarray | None,
        seed: int,
        input_id: np.ndarray,
        times_given: bool,
    ) -> HeteroSamplerOutput:
        """:meth:`_sample`'s hops, with buffers sized as an earlier call's batch
        (:class:`samplers.neighbor.SizeHints`), to which it gives its own sizes."""
        input_type = next(iter(seeds_by_type))
        disjoint = self.disjoint or seed_time is not None
        batch_size = seeds_by_type[input_type].shape[0]
        sizes = self._sizes.take()
        dense = not disjoint and self.subgraph_type != "induced"
        nodes = {
            t: batch_nodes(
                self._id_maps[t] if dense else None,
                sizes.table_bits[t],
                sizes.nodes[t],
                disjoint or self.num_nodes[t] > np.iinfo(np.int32).max,
            )
            for t in self.node_types
        }
        # Each node type's frontier: its local ids that joined at the previous hop.
        frontier = {t: (0, 0) for t in self.node_types}
        num_sampled_nodes = {t: [0] for t in self.node_types}
        first_tree = 0
        for node_type, ids in seeds_by_type.items():
            keys = ids
            if disjoint:  # a batch node is its id and its tree
                trees = np.arange(first_tree, first_tree + ids.shape[0], dtype=np.int64)
                keys = ids | (trees << REPEAT_SHIFT)
            first_tree += ids.shape[0]
            nodes[node_type].start(keys)
            frontier[node_type] = (0, ids.shape[0])
            num_sampled_nodes[node_type] = [ids.shape[0]]
        edges = {e: EdgeBuffers(sizes.edges[e]) for e in self.edge_types}
        num_sampled_edges = {e: [] for e in self.edge_types}
        num_edge_types = len(self.edge_types)
        for hop in range(self.num_hops):
            hop_start = {t: nodes[t].count for t in self.node_types}
            for index, edge_type in enumerate(self._sampling_order):
                src, _, dst = edge_type
                fanout = self.num_neighbors[edge_type][hop]
                first, last = frontier[dst]
                if fanout == 0 or first == last:
                    num_sampled_edges[edge_type].append(0)
                    continue
                frontier_keys = nodes[dst].keys[first:last]
                time_limits = None
                if disjoint:
                    targets = frontier_keys & REPEAT_MASK
                    tagged = frontier_keys
                    if seed_time is not None and self._timed[edge_type]:
                        time_limits = seed_time[frontier_keys >> REPEAT_SHIFT]
                else:
                    targets = frontier_keys
                    # Only the seeds can repeat; later frontiers hold each node once.
                    tagged = tag_repeats(targets) if hop == 0 else targets
                slots = HopSlots(edges[edge_type], first, last=hop == self.num_hops - 1)
                offsets = self._samplers[edge_type].sample_hop(
                    targets,
                    tagged,
                    fanout,
                    hop_key(seed, hop * num_edge_types + index),
                    slots,
                    time_limits,
                )
                hop_edges = int(offsets[-1])
                hop_row, hop_col = edges[edge_type].hop_rows_and_cols()
                if not slots.columns_filled:
                    with parallel_guard():
                        kernels.edge_columns(offsets, first, hop_col)
                if disjoint:  # a neighbor joins the tree of the node it was sampled for
                    hop_row |= nodes[dst].keys[hop_col] & ~REPEAT_MASK
                nodes[src].relabel(hop_row)
                edges[edge_type].commit()
                num_sampled_edges[edge_type].append(hop_edges)
            for t in self.node_types:
                frontier[t] = (hop_start[t], nodes[t].count)
                num_sampled_nodes[t].append(nodes[t].count - hop_start[t])

        self._sizes.give_back(
            _HeteroSizes(
                {t: table_bits_for(nodes[t].count) for t in self.node_types},
                {t: nodes[t].count for t in self.node_types},
                {e: edges[e].used for e in self.edge_types},
            )
        )

        row = {e: edges[e].row[: edges[e].used] for e in self.edge_types}
        col = {e: edges[e].col[: edges[e].used] for e in self.edge_types}
        edge = {e: edges[e].edge[: edges[e].used] for e in self.edge_types}
        out_nodes = {t: nodes[t].keys[: nodes[t].count] for t in self.node_types}
        for t, kind in nodes.items():
            if isinstance(kind, DenseBatchNodes):  # a failed call drops its maps instead
                self._id_maps[t].give_back(kind)
        counts_nodes: dict | None = {t: tuple(c) for t, c in num_sampled_nodes.items()}
        counts_edges: dict | None = {e: tuple(c) for e, c in num_sampled_edges.items()}
        if self.subgraph_type == "induced":
            for e in self.edge_types:
                row[e], col[e], edge[e] = self._induced(e, nodes, out_nodes[e[2]])
            counts_nodes = counts_edges = None
        elif self.subgraph_type == "bidirectional":
            row, col, edge = _to_bidirectional(self._reverse, row, col, edge)
            counts_nodes = counts_edges = None
        return HeteroSamplerOutput(
            node={t: k & REPEAT_MASK if disjoint else k for t, k in out_nodes.items()},
            row=row,
            col=col,
            edge=edge,
            num_sampled_nodes=counts_nodes,
            num_sampled_edges=counts_edges,
            batch_size=batch_size,
            input_id=np.asarray(input_id, dtype=np.int64),
            input_type=input_type,
            batch={t: k >> REPEAT_SHIFT for t, k in out_nodes.items()} if disjoint else None,
            seed_time=seed_time if times_given else None,  # as PyG: the input's
        )

    def _induced(
        self, edge_type: EdgeType, nodes: dict[str, BatchNodes], dst_keys: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every edge of ``edge_type`` whose ends are both batch nodes (of one tree, when
        disjoint), grouped by destination in batch order, CSC order within: int64
        ``(row, col, edge)``."""
        source = nodes[edge_type[0]]
        if source.count == 0 or dst_keys.shape[0] == 0:
            return tuple(np.empty(0, dtype=np.int64) for _ in range(3))
        indptr, indices = self.csc[edge_type]
        shift = 64 - source.bits
        with parallel_guard():
            offsets = induced.induced_offsets(
                indptr, indices, dst_keys, REPEAT_MASK, source.table, shift
            )
            count = int(offsets[-1])
            row, col, edge = (np.empty(count, dtype=np.int64) for _ in range(3))
            induced.induced_fill(
                indptr,
                indices,
                dst_keys,
                REPEAT_MASK,
                source.table,
                shift,
                offsets,
                row,
                col,
                edge,
            )
        return row, col, edge


def hetero_fanouts(
    num_neighbors: Sequence[int] | Mapping[EdgeType | str, Sequence[int]],
    edge_types: Sequence[EdgeType],
) -> dict[EdgeType, tuple[int, ...]]:
    """Each edge type's fanouts (``-1``: all), by PyG's ``NumNeighbors`` rules: a list holds
    for every edge type; a dict (keys ``(src, rel, dst)`` or ``"src__rel__dst"``) names every
    edge type (``[0, ...]`` samples none of a type; PyG's ``NumNeighbors`` with a ``default``
    fills the others, see the loader).

    Raises:
        ValueError: a dict key that is no edge type of the graph, an edge type the dict lacks,
            an entry below ``-1``, or lists of different lengths ("hops must be the same across
            all edge types").
    """
    if isinstance(num_neighbors, Mapping):
        given = {}
        for key, fanouts in num_neighbors.items():
            edge_type = _edge_type_key(key)
            if edge_type not in edge_types:
                raise ValueError(
                    f"'num_neighbors' names edge type {key!r}, which the graph does not have "
                    f"(edge types: {list(edge_types)})"
                )
            given[edge_type] = check_fanouts(fanouts, f"num_neighbors[{edge_type}]")
        hops = {len(f) for f in given.values()}
        if len(hops) > 1:
            raise ValueError(
                "the number of hops must be the same across all edge types in "
                f"'num_neighbors' (got lengths {sorted(hops)})"
            )
        for edge_type in edge_types:
            if edge_type not in given:
                raise ValueError(
                    f"Missing number of neighbors for edge type {edge_type} in 'num_neighbors' "
                    "(give [0, ...] to sample none of it, or PyG's NumNeighbors with a default)"
                )
        return given
    fanouts = check_fanouts(num_neighbors, "num_neighbors")
    return dict.fromkeys(edge_types, fanouts)


def _reverse_plan(edge_types: Sequence[EdgeType]) -> list[tuple[EdgeType, EdgeType, bool]]:
    """PyG's ``HeteroSamplerOutput.to_bidirectional`` pairing, worked out once: ``(edge type,
    the type whose edges reversed it merges, whether that type gets the result reversed)``.
    Warns, as PyG does, for an edge type with no reverse type."""
    present = set(edge_types)
    plan = []
    for edge_type in edge_types:
        src, rel, dst = edge_type
        if rel.startswith("rev_"):
            continue
        reverse = (dst, f"rev_{rel}", src)
        if src == dst and reverse not in present:
            plan.append((edge_type, edge_type, False))
        elif reverse in present:
            plan.append((edge_type, reverse, True))
        else:
            candidates = [e for e in edge_types if (e[0], e[2]) == (dst, src)]
            if len(candidates) == 1:
                plan.append((edge_type, candidates[0], False))
            else:
                warnings.warn(
                    f"Cannot convert to bidirectional graph since the edge type {edge_type} "
                    "does not seem to have a reverse edge type",
                    stacklevel=3,
                )
    return plan


def _to_bidirectional(plan, row, col, edge):
    """Apply :func:`_reverse_plan`'s ``plan`` to the sampled ``row``/``col``/``edge`` dicts."""
    out_row, out_col, out_edge = dict(row), dict(col), dict(edge)
    for edge_type, reverse, write_reverse in plan:
        merged_row, merged_col, _ = merge_reverse(
            row[edge_type], col[edge_type], row[reverse], col[reverse]
        )
        out_row[edge_type], out_col[edge_type] = merged_row, merged_col
        out_edge[edge_type] = None
        if write_reverse:
            out_row[reverse], out_col[reverse] = merged_col, merged_row
            out_edge[reverse] = None
    return out_row, out_col, out_edge


def _check_node_types(node_types) -> list[str]:
    if isinstance(node_types, (str, bytes)) or not isinstance(node_types, Sequence):
        raise TypeError(f"'node_types' must be a list of strings (got {node_types!r})")
    types = list(node_types)
    if not types or not all(isinstance(t, str) for t in types):
        raise ValueError(f"'node_types' must be a non-empty list of strings (got {types!r})")
    if len(set(types)) != len(types):
        raise ValueError(f"'node_types' must be distinct (got {types!r})")
    return types


def _check_num_nodes(num_nodes, node_types: list[str]) -> dict[str, int]:
    if not isinstance(num_nodes, Mapping):
        raise TypeError(f"'num_nodes' must be a dict from node type to int (got {num_nodes!r})")
    if set(num_nodes) != set(node_types):
        raise ValueError(
            f"'num_nodes' must have exactly the node types {node_types} as keys "
            f"(got {list(num_nodes)})"
        )
    out = {}
    for t in node_types:
        n = num_nodes[t]
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"'num_nodes[{t!r}]' must be an int >= 0 (got {n!r})")
        if n > 1 << REPEAT_SHIFT:
            raise ValueError(f"node types above 2**{REPEAT_SHIFT} nodes are not supported")
        out[t] = int(n)
    return out


def _edge_type_key(key) -> EdgeType:
    """``key`` as a ``(src, rel, dst)`` tuple: a 3-tuple of strings or ``"src__rel__dst"``."""
    if isinstance(key, str):
        parts = tuple(key.split("__"))
        if len(parts) == 3:
            return parts
    elif isinstance(key, tuple) and len(key) == 3 and all(isinstance(p, str) for p in key):
        return key
    raise ValueError(f"an edge type is a (src, relation, dst) tuple of strings (got {key!r})")


def _check_edge_type(key, node_types: list[str], name: str) -> EdgeType:
    edge_type = _edge_type_key(key)
    for end in (edge_type[0], edge_type[2]):
        if end not in node_types:
            raise ValueError(
                f"'{name}' edge type {edge_type} names node type {end!r}, which is not in "
                f"'node_types' {node_types}"
            )
    return edge_type


def _per_type(values, types: list, name: str, as_key=None) -> dict:
    """``values`` (a dict or ``None``) keyed by ``types``' members (its keys read by
    ``as_key`` if given), checked for unknown keys."""
    if values is None:
        return {}
    if not isinstance(values, Mapping):
        raise TypeError(f"'{name}' must be a dict per type or None (got {type(values).__name__})")
    out = {}
    for key, value in values.items():
        typed = key if as_key is None else as_key(key)
        if typed not in types:
            raise ValueError(f"'{name}' names type {key!r}, which the graph does not have")
        out[typed] = value
    return out


def _check_typed_csc(
    pair, num_src: int, num_dst: int, edge_type: EdgeType, validate: bool
) -> tuple[np.ndarray, np.ndarray]:
    """``(indptr, indices)`` of one edge type, checked as :func:`samplers.csc.check_csc` does
    but with sources bounded by the source type's node count (the full pass only when
    ``validate``)."""
    if not isinstance(pair, tuple | list) or len(pair) != 2:
        raise TypeError(f"csc[{edge_type}] must be a pair (indptr, indices)")
    indptr, indices = pair
    if not isinstance(indptr, np.ndarray) or indptr.dtype != np.int64 or indptr.ndim != 1:
        raise TypeError(f"csc[{edge_type}]: 'indptr' must be a 1-D int64 numpy array")
    if (
        not isinstance(indices, np.ndarray)
        or indices.dtype not in _INDEX_DTYPES
        or indices.ndim != 1
    ):
        raise TypeError(f"csc[{edge_type}]: 'indices' must be a 1-D int32 or int64 numpy array")
    if indptr.shape[0] != num_dst + 1:
        raise ValueError(
            f"csc[{edge_type}]: 'indptr' must have num_nodes[{edge_type[2]!r}] + 1 = "
            f"{num_dst + 1} entries (got {indptr.shape[0]})"
        )
    if not validate:
        return indptr, indices
    if indptr[0] != 0 or indptr[-1] != indices.shape[0]:
        raise ValueError(
            f"csc[{edge_type}]: 'indptr' must run from 0 to len(indices) = {indices.shape[0]} "
            f"(got {int(indptr[0])} to {int(indptr[-1])})"
        )
    if indptr.shape[0] > 1 and np.diff(indptr).min() < 0:
        raise ValueError(f"csc[{edge_type}]: 'indptr' must be non-decreasing")
    if indices.size:
        low, high = int(indices.min()), int(indices.max())
        if low < 0 or high >= num_src:
            raise ValueError(
                f"csc[{edge_type}]: 'indices' must lie in [0, {num_src}) for the "
                f"{num_src} nodes of source type {edge_type[0]!r} (found "
                f"{low if low < 0 else high})"
            )
    return indptr, indices
