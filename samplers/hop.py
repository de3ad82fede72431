"""One hop of multi-hop sampling: the contract between :class:`samplers.MultiHopSampler`,
which runs the hops, and whatever draws a hop's neighbors (its subclasses, e.g.
:class:`samplers.NeighborSampler` over one CSC or
:class:`graphengine.distributed.DistNeighborSampler` across the parts of a partition).

A hop gets its frontier (int64 global ids) with a random stream number per entry (the node's
id, a repeated seed tagged by :func:`tag_repeats` or, in disjoint sampling, the node's tree
in the bits above :data:`REPEAT_SHIFT`; :func:`untag` splits them again), writes its sampled
edges where :class:`HopSlots` says, and returns its per-node offsets.
:meth:`samplers.MultiHopSampler.sample_hop_edges` runs one hop on its own and returns
:class:`HopEdges`, as a partition's owner does for the nodes other workers ask it for.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

#: Node ids lie below ``2**REPEAT_SHIFT``; the bits above number the repeats of a seed, or
#: the tree of a node in disjoint sampling.
REPEAT_SHIFT = 40
REPEAT_MASK = (1 << REPEAT_SHIFT) - 1
# Disjoint trees, and the repeats of a seed, are numbered in the bits above REPEAT_SHIFT:
# at most 2**23 seeds a batch.
MAX_BATCH_SEEDS = 1 << (63 - REPEAT_SHIFT)
#: The largest fanout a hop takes (the samplers' and PyG's fanouts are ints; a larger one
#: without replacement means all neighbors, as ``-1`` says).
MAX_FANOUT = 2**31 - 1
#: The most edges one hop may sample with replacement (``frontier * fanout``): 96 GiB of
#: ``row``/``col``/``edge`` already, and far below where the kernels' int64 offsets wrap.
MAX_HOP_EDGES = 1 << 32


class HopEdges(NamedTuple):
    """The edges one hop sampled, run on its own (:meth:`MultiHopSampler.sample_hop_edges`).

    Attributes:
        offsets: int64 ``[len(frontier) + 1]``: frontier node ``i``'s edges are entries
            ``offsets[i]:offsets[i + 1]`` of the two arrays below.
        neighbors: int64 ``[num_edges]``, each edge's source, as the sampler's graph numbers
            its nodes.
        edges: int64 ``[num_edges]``, each edge's id in the sampler's graph (its CSC
            position, or the original edge id where the sampler maps them back).
    """

    offsets: np.ndarray
    neighbors: np.ndarray
    edges: np.ndarray


class EdgeBuffers:
    """A batch's growing ``row``/``col``/``edge`` arrays (int64), and ``weight`` (float32) once
    a hop weighs its edges: the committed hops, then the hop being sampled."""

    def __init__(self, capacity: int):
        self.row = np.empty(capacity, dtype=np.int64)
        self.col = np.empty(capacity, dtype=np.int64)
        self.edge = np.empty(capacity, dtype=np.int64)
        self.weight: np.ndarray | None = None
        self.used = 0
        self.end = 0

    def reserve(self, count: int, last: bool = False) -> None:
        """Room for ``count`` edges after the committed ones. For the ``last`` hop, ``row``
        and ``col`` become the two rows of one int64 ``[2, num_edges]`` array holding exactly
        the batch's edges, which a loader then takes as its ``edge_index`` without a copy
        (:func:`samplers.as_edge_index`): only the earlier hops' edges are copied, here."""
        self.end = self.used + count
        self.edge = grow(self.edge, self.used, self.end)
        if last:
            pair = np.empty((2, self.end), dtype=np.int64)
            pair[0, : self.used] = self.row[: self.used]
            pair[1, : self.used] = self.col[: self.used]
            self.row, self.col = pair
        else:
            self.row, self.col = (grow(a, self.used, self.end) for a in (self.row, self.col))
        if self.weight is not None:
            self.weight = grow(self.weight, self.used, self.end)
            self.weight[self.used : self.end] = 1.0

    def hop_weights(self) -> np.ndarray:
        """The reserved edges' weights (float32), the earlier hops' edges weighing 1."""
        if self.weight is None:
            self.weight = np.ones(max(self.end, self.row.shape[0]), dtype=np.float32)
        return self.weight[self.used : self.end]

    def hop_rows_and_cols(self) -> tuple[np.ndarray, np.ndarray]:
        """The reserved edges' ``row`` and ``col`` (int64 views)."""
        return self.row[self.used : self.end], self.col[self.used : self.end]

    def hop_edges(self, offsets: np.ndarray) -> HopEdges:
        """The reserved edges as :class:`HopEdges`, ``offsets`` being the hop's."""
        return HopEdges(offsets, self.row[self.used : self.end], self.edge[self.used : self.end])

    def commit(self) -> None:
        self.used = self.end


class HopSlots:
    """Where one hop writes its sampled edges.

    A hop calls :meth:`reserve` once, with its number of sampled edges, and fills the two
    arrays it returns frontier node by frontier node; it may also write the edges'
    batch-local destinations (:meth:`columns`) and weights (:meth:`weights`).

    Attributes:
        first_local: the batch-local id of the hop's first frontier node.
        last: whether this is the batch's last hop (see :meth:`EdgeBuffers.reserve`).
        columns_filled: whether the hop wrote the edges' batch-local destinations
            (:meth:`columns`); otherwise the sampler fills them from the offsets.
    """

    def __init__(self, buffers: EdgeBuffers, first_local: int, last: bool = False):
        self._buffers = buffers
        self.first_local = first_local
        self.last = last
        self.columns_filled = False

    def reserve(self, count: int) -> tuple[np.ndarray, np.ndarray]:
        """Room for the hop's ``count`` edges: (neighbor ids, edge ids), int64 ``[count]``."""
        self._buffers.reserve(count, self.last)
        b = self._buffers
        return b.row[b.used : b.end], b.edge[b.used : b.end]

    def columns(self) -> np.ndarray:
        """The reserved edges' destination slots (int64, batch-local ids), for a hop that
        writes them as it draws."""
        self.columns_filled = True
        return self._buffers.col[self._buffers.used : self._buffers.end]

    def weights(self) -> np.ndarray:
        """The reserved edges' weights (float32, 1 until written), for a hop whose edges carry
        weights for an estimate of the mean over all neighbors (LABOR); the batch then has
        ``edge_weight``."""
        return self._buffers.hop_weights()


def check_hop_size(frontier_size: int, fanout: int, replace: bool) -> None:
    """Refuse a hop that would size its output past :data:`MAX_HOP_EDGES`: with replacement
    each of the ``frontier_size`` nodes may get ``fanout`` edges (without, at most its
    degree, which the graph bounds). Checked in Python ints before the kernels add the counts
    up in int64, where ``frontier_size * fanout`` could wrap and size the buffers wrong.

    Raises:
        ValueError: naming ``num_neighbors``, the fanout, the frontier size and the limit.
    """
    if replace and fanout > 0 and frontier_size * fanout > MAX_HOP_EDGES:
        raise ValueError(
            f"'num_neighbors': a hop of {frontier_size} nodes with fanout {fanout} and "
            f"replace=True samples up to {frontier_size * fanout} edges, above the "
            f"{MAX_HOP_EDGES} one hop may hold; lower the fanout or the batch size"
        )


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
    """``(ids, tags)`` of stream numbers (int64 each): the node ids, and the bits above
    :data:`REPEAT_SHIFT` (a seed's repeat from :func:`tag_repeats`, or a node's tree), so
    that ``ids + tags`` numbers the same streams for another numbering of the nodes."""
    return tagged & REPEAT_MASK, tagged & ~REPEAT_MASK


def grow(array: np.ndarray, used: int, needed: int) -> np.ndarray:
    """``array`` if it holds ``needed`` entries, else a larger copy of its first ``used``."""
    if array.shape[0] >= needed:
        return array
    grown = np.empty(max(needed, used + used // 2), dtype=array.dtype)
    grown[:used] = array[:used]
    return grown
