"""Neighbor sampling over a partitioned graph: each worker samples the nodes its part owns.

Every hop, a worker groups its frontier by owner and sends each owner one request (the
frontier nodes it owns, with their time limits in temporal sampling,
:class:`~graphengine.distributed.exchange.Exchange`); each owner samples everything it was
asked for in one call of the single-machine sampler's hop (a :class:`samplers.NeighborSampler`
over its part: uniform, weighted or temporal, the same kernels) and answers each asker with
one message; the asker puts the answers back in frontier order. A node's draws are keyed by
(batch seed, hop, original id) and its in-edges keep their original order inside its part,
so a batch equals, ids mapped back, the one :class:`samplers.NeighborSampler` draws on the
original graph, for any number of parts and threads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from graphengine.data.partition import Part
from graphengine.distributed.exchange import Exchange
from samplers import (
    HopSlots,
    MultiHopSampler,
    NeighborSampler,
    check_max_degree,
    check_times,
    check_weights,
    untag,
)


@dataclass
class SamplingStats:
    """What a :class:`DistNeighborSampler` did since its stats were last reset.

    Attributes:
        frontier_nodes: frontier nodes this worker sampled for (its own batches).
        remote_frontier_nodes: those of them owned by other workers.
        served_edges: edges this worker sampled, for itself and for others.
        cut_edges: those of them whose source another worker owns.
    """

    frontier_nodes: int = 0
    remote_frontier_nodes: int = 0
    served_edges: int = 0
    cut_edges: int = 0

    def as_dict(self) -> dict:
        return dict(vars(self))


class DistNeighborSampler(MultiHopSampler):
    """Uniform neighbor sampling across the parts of a partition, one part per worker.

    Node ids in and out are global new ids (the partition's numbering; map them with
    ``part.book.to_orig``); ``edge`` in the output holds original edge ids.

    Every worker of ``exchange`` must call :meth:`sample_from_nodes` the same number of
    times, in the same order, with no other use of ``exchange`` in between (a worker with no
    seeds for a batch passes an empty one): each hop is a collective.

    Args:
        part: this worker's part (:func:`graphengine.data.partition.open_part`);
            ``part.part`` must be the worker's rank in ``exchange``.
        fanouts: neighbors per node for each hop, ``-1`` for all.
        replace: sample with replacement.
        exchange: the exchange with the other parts' workers.
        num_threads: Numba threads each call may use (``None``: one per core).
        disjoint: each seed its own tree (see :class:`samplers.MultiHopSampler`); a tree's
            tag travels with each node asked of another part, so its draws are the same.
        subgraph_type: ``"directional"`` or ``"bidirectional"``; induced subgraphs need
            every batch node's in-edges, most on other parts, and are refused.
        weights: optional float ``[num_edges]``, the whole graph's edge weights by original
            edge id (each worker keeps its part's): weighted draws.
        node_time, edge_time: optional integer times of the whole graph, by original node or
            edge id: temporal sampling (disjoint trees; seed times from the input or, with
            node times, the seeds' own).
        temporal_strategy: ``"uniform"`` or ``"last"``.
    """

    def __init__(
        self,
        part: Part,
        fanouts: Sequence[int],
        exchange: Exchange,
        replace: bool = False,
        num_threads: int | None = None,
        disjoint: bool = False,
        subgraph_type: str = "directional",
        weights: np.ndarray | None = None,
        node_time: np.ndarray | None = None,
        edge_time: np.ndarray | None = None,
        temporal_strategy: str = "uniform",
    ):
        if subgraph_type == "induced":
            raise ValueError(
                "a partitioned graph builds no induced subgraphs (every batch node's in-edges "
                "would have to be read from its part); use subgraph_type='directional' or "
                "'bidirectional'"
            )
        super().__init__(
            part.book.num_nodes, fanouts, replace, num_threads, disjoint, subgraph_type
        )
        if exchange.world_size != part.book.num_parts or exchange.rank != part.part:
            raise ValueError(
                f"part {part.part} of {part.book.num_parts} needs worker {part.part} of "
                f"{part.book.num_parts} (got worker {exchange.rank} of {exchange.world_size})"
            )
        check_max_degree(part.indptr)
        self.part = part
        self.exchange = exchange
        self.bounds = part.book.bounds
        # Only this part's slice of the map is read (the draws are keyed by original ids).
        self.orig_ids = np.asarray(part.book.new_to_orig[part.start : part.stop])
        self.stats = SamplingStats()
        self.node_time = None
        if node_time is not None:
            self.node_time = check_times(node_time, part.book.num_nodes, "node_time")
        self._timed = node_time is not None or edge_time is not None
        # The hop this worker runs for the nodes it owns: the single-machine sampler over its
        # part's CSC, with the part's weights and times in that CSC's order.
        edge_ids = np.asarray(part.edge_ids)
        part_weights = part_times = None
        num_edges = _num_edges(part, weights if weights is not None else edge_time)
        if weights is not None:
            part_weights = check_weights(weights, num_edges)[edge_ids]
        if edge_time is not None:
            part_times = check_times(edge_time, num_edges, "edge_time")[edge_ids]
        elif self.node_time is not None:  # a source's time, as each of its edges' time
            part_times = self.node_time[part.book.to_orig(part.indices)]
        self._hop = NeighborSampler(
            part.indptr,
            part.indices,
            fanouts,
            replace,
            validate=False,
            num_threads=num_threads,
            weights=part_weights,
            edge_time=part_times,
            temporal_strategy=temporal_strategy,
        )

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(part={self.part.part}/{self.part.book.num_parts}, "
            f"nodes={self.part.num_nodes}/{self.num_nodes}, fanouts={list(self.fanouts)}, "
            f"replace={self.replace})"
        )

    @property
    def temporal(self) -> bool:
        return self._timed

    def seed_node_times(self, seeds: np.ndarray) -> np.ndarray | None:
        return None if self.node_time is None else self.node_time[self.part.book.to_orig(seeds)]

    def reset_stats(self) -> SamplingStats:
        """The stats so far; starts counting anew."""
        stats, self.stats = self.stats, SamplingStats()
        return stats

    def sample_hop(
        self,
        frontier: np.ndarray,
        tagged: np.ndarray,
        fanout: int,
        key: np.uint64,
        slots: HopSlots,
        time_limits: np.ndarray | None = None,
    ) -> np.ndarray:
        num_parts = self.part.book.num_parts
        owners = np.searchsorted(self.bounds, frontier, side="right") - 1
        order = np.argsort(owners, kind="stable")
        counts = np.bincount(owners, minlength=num_parts)
        self.stats.frontier_nodes += frontier.shape[0]
        self.stats.remote_frontier_nodes += frontier.shape[0] - int(counts[self.part.part])

        bounds = np.cumsum(counts)[:-1]
        requests = np.split(tagged[order], bounds)
        if time_limits is not None:  # each request: the nodes, then their time limits
            limits = np.split(time_limits[order], bounds)
            requests = [np.concatenate(pair) for pair in zip(requests, limits, strict=True)]
        requests = self.exchange.all_to_all_numpy(requests)
        answers = self.exchange.all_to_all_numpy(
            self._serve(requests, fanout, key, time_limits is not None)
        )

        # Answers come grouped by owner, each in the order asked: put them in frontier order.
        grouped_counts, grouped_neighbors, grouped_edges = [], [], []
        for asked, answer in zip(counts.tolist(), answers, strict=True):
            sizes = answer[:asked]
            total = int(sizes.sum())
            grouped_counts.append(sizes)
            grouped_neighbors.append(answer[asked : asked + total])
            grouped_edges.append(answer[asked + total :])
        sizes = np.concatenate(grouped_counts)
        per_node = np.empty(frontier.shape[0], dtype=np.int64)
        per_node[order] = sizes
        offsets = np.zeros(frontier.shape[0] + 1, dtype=np.int64)
        np.cumsum(per_node, out=offsets[1:])
        neighbors, edges = slots.reserve(int(offsets[-1]))
        source_starts = np.cumsum(sizes) - sizes
        slots = np.repeat(offsets[:-1][order] - source_starts, sizes)
        slots += np.arange(slots.shape[0], dtype=np.int64)
        neighbors[slots] = np.concatenate(grouped_neighbors)
        edges[slots] = np.concatenate(grouped_edges)
        return offsets

    def _serve(
        self, requests: list[np.ndarray], fanout: int, key: np.uint64, timed: bool
    ) -> list[np.ndarray]:
        """Sample the nodes each worker asked this one for (``timed``: each request holds the
        nodes, then their time limits); one answer per worker: int64 ``[per-node counts (one
        per node asked), neighbors, original edge ids]``."""
        limits = None
        if timed:
            halves = [np.split(r, 2) for r in requests]
            requests = [nodes for nodes, _ in halves]
            limits = np.concatenate([times for _, times in halves])
        asked = np.concatenate(requests)
        ids, tags = untag(asked)
        local = ids - self.part.start
        if local.size and (local.min() < 0 or local.max() >= self.part.num_nodes):
            bad = ids[(local < 0) | (local >= self.part.num_nodes)][0]
            raise RuntimeError(
                f"part {self.part.part} was asked to sample node {bad}, which it does not own "
                f"[{self.part.start}, {self.part.stop}): the workers disagree on the partition"
            )
        offsets, neighbors, positions = self._hop.sample_hop_edges(
            local, self.orig_ids[local] + tags, fanout, key, limits
        )
        edge_ids = np.asarray(self.part.edge_ids)[positions]
        self.stats.served_edges += neighbors.shape[0]
        self.stats.cut_edges += int(
            np.count_nonzero((neighbors < self.part.start) | (neighbors >= self.part.stop))
        )
        sizes = np.diff(offsets)
        node_bounds = np.cumsum([0] + [r.shape[0] for r in requests])
        edge_bounds = offsets[node_bounds]
        return [
            np.concatenate(
                (
                    sizes[node_bounds[p] : node_bounds[p + 1]],
                    neighbors[edge_bounds[p] : edge_bounds[p + 1]],
                    edge_ids[edge_bounds[p] : edge_bounds[p + 1]],
                )
            )
            for p in range(len(requests))
        ]


def _num_edges(part: Part, values) -> int:
    """The edges of the whole graph, from the partition's manifest (or, for a partition built
    in memory, the length of ``values``, a whole-graph edge array, if it covers the part's
    edge ids); 0 without ``values``."""
    if values is None:
        return 0
    recorded = part.book.manifest.get("num_edges")
    if recorded is not None:
        return int(recorded)
    length = int(np.asarray(values).shape[0])
    edge_ids = np.asarray(part.edge_ids)
    if edge_ids.size and int(edge_ids.max()) >= length:
        raise ValueError(
            f"an edge array of the whole graph must cover every edge id (got {length} entries, "
            f"part {part.part} holds edge {int(edge_ids.max())})"
        )
    return length
