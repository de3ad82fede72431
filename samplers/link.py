"""Sampling around seed edges (link prediction), as PyG's ``edge_sample``, on homogeneous and
heterogeneous graphs: negative edges drawn as PyG draws them (optionally never a true edge),
both ends of every edge sampled as seed nodes by a node sampler, and the labels that say which
seed is which.

NumPy in, NumPy out. Negatives are drawn by the Numba kernels of
:mod:`samplers._kernels.negative`, each from a counter-based random stream keyed by the batch's
seed, so a batch depends on its seed only, whatever the number of threads.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from samplers._kernels import negative as kernels
from samplers._kernels import weighted
from samplers._kernels.random import MAX_BOUND, hop_key
from samplers._kernels.threading import parallel_guard
from samplers.base import (
    BaseSampler,
    EdgeSamplerInput,
    HeteroSamplerOutput,
    SamplerInput,
    SamplerOutput,
)

NEGATIVE_MODES = ("binary", "triplet")
# Draws per negative (the first and its redraws) before giving up on finding one that is not a
# true edge.
MAX_DRAWS = 100
# The random stream of a batch's negatives: hop_key(batch seed, NEGATIVE_STREAM), apart from
# the hops' streams.
NEGATIVE_STREAM = 1 << 41
_MAX_KEY = np.iinfo(np.int64).max


@dataclass(frozen=True)
class NegativeSampling:
    """How to draw negative edges, as PyG's ``NegativeSampling``.

    Attributes:
        mode: ``'binary'`` (``amount`` random node pairs per positive edge, labelled 0) or
            ``'triplet'`` (``amount`` random destinations per positive edge, an integer).
        amount: negatives per positive edge (> 0).
        exclude_edges: never draw a pair that is an edge of the graph (graphengine's option;
            PyG draws uniformly over all pairs, true edges included).
        src_weight, dst_weight: optional float ``[num nodes]`` of the source and destination
            node type, finite, ``>= 0`` and not all 0: negative sources (binary) and
            destinations are drawn in proportion to them, as PyG draws them with
            ``torch.multinomial``; uniform where ``None``.
    """

    mode: str
    amount: float = 1
    exclude_edges: bool = False
    src_weight: np.ndarray | None = dataclasses.field(default=None, compare=False, repr=False)
    dst_weight: np.ndarray | None = dataclasses.field(default=None, compare=False, repr=False)

    def __post_init__(self):
        mode = getattr(self.mode, "value", self.mode)  # PyG's NegativeSamplingMode
        if mode not in NEGATIVE_MODES:
            raise ValueError(
                f"negative sampling 'mode' must be one of {NEGATIVE_MODES} (got {mode!r})"
            )
        object.__setattr__(self, "mode", mode)
        check_amount(self.amount, "negative sampling 'amount'")
        if mode == "triplet":
            if self.amount != math.ceil(self.amount):
                raise ValueError(
                    f"'triplet' negative sampling takes an integer 'amount' (got {self.amount})"
                )
            object.__setattr__(self, "amount", int(self.amount))
        for name in ("src_weight", "dst_weight"):
            object.__setattr__(self, name, _node_weights(getattr(self, name), name))
        # Per side, its nodes' order and the running sums of its weights in that order.
        object.__setattr__(self, "_running", {})

    @classmethod
    def cast(cls, value) -> NegativeSampling | None:
        """``None``, a mode string, a ``NegativeSampling`` (graphengine's, or PyG's with its
        node weights)."""
        if value is None or isinstance(value, cls):
            return value
        if isinstance(value, str):
            return cls(value)
        if not hasattr(value, "mode") or not hasattr(value, "amount"):
            raise TypeError(
                "'neg_sampling' must be None, 'binary', 'triplet' or a NegativeSampling (got "
                f"{value!r})"
            )
        weights = {name: getattr(value, name, None) for name in ("src_weight", "dst_weight")}
        return cls(value.mode, value.amount, **weights)

    def running_weights(self, side: str, num_nodes: int, by_time: NodesByTime | None):
        """The running sums (float64 ``[num_nodes]``) of ``side``'s (``"src"`` or ``"dst"``)
        weights over its nodes in ``by_time``'s order (or by id), as the kernels draw by them;
        an empty array without weights. Kept for the last order asked, so that the batches of
        a loader do not sum them again.

        Raises:
            ValueError: the weights are not one per node of the side.
        """
        weights = self.src_weight if side == "src" else self.dst_weight
        if weights is None:
            return np.empty(0, dtype=np.float64)
        if weights.shape[0] != num_nodes:
            raise ValueError(
                f"'{side}_weight' must hold one weight per node of its type ({num_nodes}) (got "
                f"{weights.shape[0]})"
            )
        order = None if by_time is None else by_time.order
        kept = self._running.get(side)
        if kept is None or kept[0] is not order:
            kept = (order, _running_sums(weights if order is None else weights[order]))
            self._running[side] = kept
        return kept[1]


def _running_sums(weights: np.ndarray) -> np.ndarray:
    """The running sums of ``weights`` (float64 ``[n]``, finite, ``>= 0``), in the units of
    :func:`samplers._kernels.weighted.overflow_scale` where their plain sum overflows: the
    kernels draw by proportions of the total, which the exact scaling keeps."""
    running = np.cumsum(weights)
    if running.size and not np.isfinite(running[-1]):
        running = np.cumsum(weights * weighted.overflow_scale(weights.max()))
    return running


def _node_weights(weights, name: str) -> np.ndarray | None:
    """Node weights (array-like, a CPU tensor too) as float64 ``[n]``, or ``None``."""
    if weights is None:
        return None
    array = np.asarray(weights)
    if array.ndim != 1 or (array.size and not np.issubdtype(array.dtype, np.number)):
        raise ValueError(
            f"'{name}' must be a 1-D array of numbers (got {array.dtype} of shape {array.shape})"
        )
    array = array.astype(np.float64)
    if not np.isfinite(array).all() or (array < 0).any():
        raise ValueError(f"'{name}' must be finite and >= 0 (got {array[~(array >= 0)][:3]})")
    if not (array > 0).any():
        raise ValueError(f"'{name}' must give some node a positive weight (all are 0)")
    return array


def check_amount(value, name: str, least: str = "positive") -> None:
    """``TypeError`` unless ``value`` is a real number (not a bool), ``ValueError`` unless it
    is finite and positive (``least='>= 0'``: or zero); both name it as ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number (got {value!r})")
    if not math.isfinite(value) or not (value >= 0 if least == ">= 0" else value > 0):
        raise ValueError(f"{name} must be finite and {least} (got {value})")


@dataclass(frozen=True)
class LinkSamplerOutput:
    """The subgraph around a batch of seed edges, and what PyG's link loader puts in the
    batch besides it.

    Attributes:
        subgraph: the node sampler's output for the seed nodes (both ends of every edge,
            negatives included; each once, unless disjoint); heterogeneous: a
            :class:`HeteroSamplerOutput` whose positions count per node type.
        input_id: int64 ``[num_pos]``, each positive edge's ``input_id``.
        edge_label_index: int64 ``[2, num_pos + num_neg]``, binary (or no) negatives: each
            edge's ends as positions in ``subgraph.node`` (heterogeneous: the source in
            ``node[src type]``, the destination in ``node[dst type]``).
        edge_label: ``[num_pos + num_neg]`` labels (binary: 0 for negatives), or ``None``.
        edge_label_time: int64 ``[num_pos + num_neg]`` (binary or none) or ``[num_pos]``
            (triplet), each labelled edge's time, or ``None``.
        src_index, dst_pos_index: int64 ``[num_pos]``, triplet: the ends of each positive edge
            (positions among the source and the destination type's nodes).
        dst_neg_index: int64 ``[num_pos]`` or ``[num_pos, amount]``, triplet: its negatives.
    """

    subgraph: SamplerOutput | HeteroSamplerOutput
    input_id: np.ndarray
    edge_label_index: np.ndarray | None = None
    edge_label: np.ndarray | None = None
    edge_label_time: np.ndarray | None = None
    src_index: np.ndarray | None = None
    dst_pos_index: np.ndarray | None = None
    dst_neg_index: np.ndarray | None = None


class NodesByTime:
    """The nodes in time order, to draw uniformly among those no later than a time.

    Args:
        node_time: integer ``[num_nodes]``, each node's time.

    Attributes:
        order: int64 ``[num_nodes]``, the nodes by ascending time (stable).
        sorted_times: int64 ``[num_nodes]``, their times.
    """

    def __init__(self, node_time: np.ndarray):
        node_time = np.asarray(node_time)
        if node_time.ndim != 1 or (
            node_time.size and not np.issubdtype(node_time.dtype, np.integer)
        ):
            raise ValueError(
                f"'node_time' must be a 1-D array of integer times (got {node_time.dtype} "
                f"array of shape {node_time.shape})"
            )
        node_time = node_time.astype(np.int64, copy=False)
        self.order = np.argsort(node_time, kind="stable").astype(np.int64)
        self.sorted_times = np.ascontiguousarray(node_time[self.order])

    @property
    def num_nodes(self) -> int:
        return int(self.order.shape[0])


class EdgeSet:
    """The edges of a graph (or of one edge type) as sorted keys ``source * num_nodes +
    destination`` (int64), for membership tests of drawn pairs.

    Args:
        row, col: integer ``[num_edges]``, the edges' sources and destinations.
        num_nodes: the destinations' node count (``col`` lies in ``[0, num_nodes)``).
    """

    def __init__(self, row: np.ndarray, col: np.ndarray, num_nodes: int):
        self.num_nodes = int(num_nodes)
        row, col = _int_ids(row, "'row'"), _int_ids(col, "'col'")
        if row.shape != col.shape:
            raise ValueError(
                f"'row' and 'col' must be 1-D and of one length (got shapes {row.shape} and "
                f"{col.shape})"
            )
        # A negative source or a destination outside [0, num_nodes) would alias another
        # pair's key.
        if row.size and row.min() < 0:
            raise ValueError(f"'row' holds node id {int(row.min())}, below 0")
        _check_range(col, self.num_nodes, "'col'")
        if row.size and row.max() >= _MAX_KEY // max(self.num_nodes, 1):
            raise ValueError(
                f"EdgeSet keys source * {self.num_nodes} + destination overflow int64 (source "
                f"{int(row.max())})"
            )
        self.keys = np.unique(row * self.num_nodes + col)

    def contains(self, row: np.ndarray, col: np.ndarray) -> np.ndarray:
        """bool, the shape of ``row``: whether each ``(row, col)`` is an edge."""
        keys = row * self.num_nodes + col
        at = np.searchsorted(self.keys, keys)
        found = at < self.keys.shape[0]
        found[found] = self.keys[at[found]] == keys[found]
        return found


def draw_negative_pairs(
    count: int,
    num_src: int,
    num_dst: int,
    seed: int,
    times: np.ndarray | None = None,
    src_by_time: NodesByTime | None = None,
    dst_by_time: NodesByTime | None = None,
    edges: EdgeSet | None = None,
    weights: NegativeSampling | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``count`` random (source, destination) pairs, in Numba: int64 ``([count], [count])``.

    A source is uniform over ``[0, num_src)``, a destination over ``[0, num_dst)``; a side
    given by time (``src_by_time``/``dst_by_time``, with ``times``: int64 ``[count]``) draws
    pair ``i``'s node uniformly among its nodes no later than ``times[i]``. With ``weights``'
    node weights (``src_weight``, ``dst_weight``), a side draws in proportion to them instead
    (among the same nodes). With ``edges``
    (keys over ``num_dst`` destinations), a pair that is an edge is redrawn, up to
    :data:`MAX_DRAWS` draws: each pair is then uniform over the allowed pairs that are not
    edges. Pair ``i`` depends only on ``seed`` and ``i``, whatever the threads.

    Raises:
        ValueError: bad counts or sizes, a time earlier than every node's of a side, or a pair
            for which :data:`MAX_DRAWS` draws found only edges.
    """
    count = _check_count(count, "count")
    num_src = _check_side(num_src, src_by_time, "num_src", count)
    num_dst = _check_side(num_dst, dst_by_time, "num_dst", count)
    limits = _check_limits(times, count, (src_by_time, dst_by_time))
    edge_keys = _edge_keys(edges, num_src, num_dst)
    src_running = _running(weights, "src", num_src, src_by_time)
    dst_running = _running(weights, "dst", num_dst, dst_by_time)
    out_src = np.empty(count, dtype=np.int64)
    out_dst = np.empty(count, dtype=np.int64)
    if count == 0:
        return out_src, out_dst
    with parallel_guard():
        kernels.draw_pairs(
            num_src,
            *_sorted_side(src_by_time),
            src_running,
            num_dst,
            *_sorted_side(dst_by_time),
            dst_running,
            limits,
            edge_keys,
            MAX_DRAWS,
            hop_key(seed, NEGATIVE_STREAM),
            out_src,
            out_dst,
        )
    failed = int(np.count_nonzero(out_src < 0))
    if failed:
        raise ValueError(
            f"no negative pair that is not an edge found for {failed} of {count} negatives in "
            f"{MAX_DRAWS} draws each (nearly every allowed pair may be an edge, or the nodes "
            "allowed by time weigh 0)"
        )
    return out_src, out_dst


def draw_negative_destinations(
    sources: np.ndarray,
    num_dst: int,
    seed: int,
    times: np.ndarray | None = None,
    dst_by_time: NodesByTime | None = None,
    edges: EdgeSet | None = None,
    weights: NegativeSampling | None = None,
) -> np.ndarray:
    """A random destination for each of ``sources`` (int64 ``[count]``, ids ``>= 0``), in
    Numba: int64 ``[count]``, uniform over ``[0, num_dst)`` or, with ``dst_by_time`` and
    ``times`` (int64 ``[count]``), over the nodes no later than ``times[i]``; in proportion to
    ``weights.dst_weight`` where given. With ``edges``
    (keys over ``num_dst`` destinations), a destination that makes ``(source, destination)``
    an edge is redrawn, up to :data:`MAX_DRAWS` draws. Entry ``i`` depends only on ``seed``
    and ``i``, whatever the threads.

    Raises:
        ValueError: bad sources or sizes, a time earlier than every node's, or a source for
            which :data:`MAX_DRAWS` draws found only edges (it may link to every node it may).
    """
    sources = np.ascontiguousarray(sources, dtype=np.int64)
    if sources.ndim != 1:
        raise ValueError(f"'sources' must be 1-D (got shape {sources.shape})")
    if sources.size and sources.min() < 0:
        raise ValueError(f"'sources' holds node id {int(sources.min())}, below 0")
    count = sources.shape[0]
    num_dst = _check_side(num_dst, dst_by_time, "num_dst", count)
    limits = _check_limits(times, count, (None, dst_by_time))
    num_src = int(sources.max()) + 1 if sources.size else 0
    edge_keys = _edge_keys(edges, num_src, num_dst)
    dst_running = _running(weights, "dst", num_dst, dst_by_time)
    out = np.empty(count, dtype=np.int64)
    if count == 0:
        return out
    with parallel_guard():
        kernels.draw_destinations(
            sources,
            num_dst,
            *_sorted_side(dst_by_time),
            dst_running,
            limits,
            edge_keys,
            MAX_DRAWS,
            hop_key(seed, NEGATIVE_STREAM),
            out,
        )
    failed = out < 0
    if failed.any():
        raise ValueError(
            f"no negative destination that is not an edge found for source "
            f"{int(sources[np.argmax(failed)])} in {MAX_DRAWS} draws (it may link to every node "
            "it may)"
        )
    return out


def sample_from_edges(
    sampler: BaseSampler,
    inputs: EdgeSamplerInput,
    num_nodes: int | Mapping[str, int],
    negative: NegativeSampling | None = None,
    disjoint: bool = False,
    nodes_by_time: NodesByTime | Mapping[str, NodesByTime] | None = None,
    edges: EdgeSet | None = None,
) -> LinkSamplerOutput:
    """The subgraph around ``inputs``' edges, as PyG's ``edge_sample``.

    Binary negatives: ``ceil(num_pos * amount)`` pairs, sources and destinations uniform over
    the nodes (heterogeneous: of the edge type's source and destination types), or in
    proportion to ``negative``'s node weights; labels are the input's (or ones) then zeros.
    Triplet: ``amount`` destinations per positive edge, drawn alike.
    With ``nodes_by_time`` (heterogeneous: per node type; types it lacks draw over all their
    nodes, as PyG) and seed times (``inputs.time``), a negative node is drawn uniformly among
    those no later than its edge's time. With ``negative.exclude_edges``, never a pair in
    ``edges`` (redrawn: uniform over the pairs left). Negatives are drawn by
    :func:`draw_negative_pairs` / :func:`draw_negative_destinations` from ``inputs.seed``.

    The seed nodes are every edge's ends, each once unless ``disjoint`` (temporal seeds are
    disjoint), sampled by ``sampler.sample_from_nodes`` with the edges' times. Heterogeneous
    edges (``inputs.input_type`` an edge type, ``num_nodes`` a dict per node type) are sampled
    by ``sampler.sample_from_typed_nodes`` (:class:`samplers.HeteroNeighborSampler`) from the
    sources (then the destinations, when the two types differ), as PyG seeds its
    heterogeneous sampler: disjoint trees count across both types, then modulo ``num_pos``.

    Raises:
        ValueError: a node id outside its node type's range, or no allowed negative for an
            edge after :data:`MAX_DRAWS` draws (say, a node linked to every other).
    """
    edge_type = inputs.input_type
    if edge_type is None:
        num_src = num_dst = int(num_nodes)
        src_by_time = dst_by_time = nodes_by_time
    else:
        if not isinstance(num_nodes, Mapping):
            raise TypeError(
                f"heterogeneous edges {edge_type} need 'num_nodes' per node type (got "
                f"{type(num_nodes).__name__})"
            )
        num_src, num_dst = int(num_nodes[edge_type[0]]), int(num_nodes[edge_type[-1]])
        by_type = nodes_by_time or {}
        src_by_time, dst_by_time = by_type.get(edge_type[0]), by_type.get(edge_type[-1])
    src = _check_ids(inputs.row, num_src, "row")
    dst = _check_ids(inputs.col, num_dst, "col")
    num_pos = src.shape[0]
    if dst.shape[0] != num_pos:
        raise ValueError(
            f"seed edges' 'col' must hold one id per seed edge ({num_pos}) (got {dst.shape[0]})"
        )
    label, time = inputs.label, inputs.time
    for name, value in (("label", label), ("time", time)):
        if value is not None and (np.ndim(value) == 0 or len(value) != num_pos):
            raise ValueError(
                f"seed edges' '{name}' must hold one entry per seed edge ({num_pos}) (got "
                f"shape {np.shape(value)})"
            )
    src_time = dst_time = time
    disjoint = disjoint or time is not None
    if time is None:
        src_by_time = dst_by_time = None
    if negative is not None and negative.mode == "binary":
        num_neg = math.ceil(num_pos * negative.amount)
        repeats = 1 + math.ceil(negative.amount)
        pair_time = None if time is None else np.tile(time, repeats)[num_pos : num_pos + num_neg]
        src_neg, dst_neg = draw_negative_pairs(
            num_neg,
            num_src,
            num_dst,
            inputs.seed,
            pair_time,
            src_by_time,
            dst_by_time,
            edges,
            negative,
        )
        src, dst = np.concatenate([src, src_neg]), np.concatenate([dst, dst_neg])
        label = np.ones(num_pos, dtype=np.float32) if label is None else np.asarray(label)
        label = np.concatenate([label, np.zeros((num_neg, *label.shape[1:]), dtype=label.dtype)])
        if time is not None:
            src_time = dst_time = np.tile(time, repeats)[: num_pos + num_neg]
    elif negative is not None:  # triplet, laid out as PyG: negative k of edge i at k * num_pos + i
        sources = np.tile(src, negative.amount)
        neg_time = None if time is None else np.tile(time, negative.amount)
        dst_neg = draw_negative_destinations(
            sources, num_dst, inputs.seed, neg_time, dst_by_time, edges, negative
        )
        dst = np.concatenate([dst, dst_neg])
        if time is not None:
            dst_time = np.tile(time, 1 + negative.amount)
    input_id = np.asarray(inputs.input_id, dtype=np.int64)
    if edge_type is not None and edge_type[0] != edge_type[-1]:
        out, src_index, dst_index = _sample_two_types(
            sampler, edge_type, src, dst, src_time, dst_time, inputs.seed, disjoint
        )
    else:
        seeds = np.concatenate([src, dst])
        inverse = np.arange(seeds.shape[0], dtype=np.int64)
        if not disjoint:
            seeds, inverse = np.unique(seeds, return_inverse=True)
            inverse = inverse.astype(np.int64)
        seed_time = None if time is None else np.concatenate([src_time, dst_time])
        if edge_type is None:
            out = sampler.sample_from_nodes(
                SamplerInput(
                    seeds, np.arange(seeds.shape[0], dtype=np.int64), inputs.seed, seed_time
                )
            )
        else:
            times = None if seed_time is None else {edge_type[0]: seed_time}
            out = sampler.sample_from_typed_nodes({edge_type[0]: seeds}, inputs.seed, times)
        src_index, dst_index = inverse[: src.shape[0]], inverse[src.shape[0] :]
    if disjoint:
        out = _trees_per_edge(out, num_pos)
    if negative is None or negative.mode == "binary":
        return LinkSamplerOutput(out, input_id, np.stack([src_index, dst_index]), label, src_time)
    dst_neg_index = dst_index[num_pos:].reshape(-1, num_pos).T  # [num_pos, amount]
    if dst_neg_index.shape[1] == 1:  # as torch's squeeze(-1)
        dst_neg_index = dst_neg_index[:, 0]
    return LinkSamplerOutput(
        out,
        input_id,
        edge_label_time=src_time,
        src_index=src_index,
        dst_pos_index=dst_index[:num_pos],
        dst_neg_index=dst_neg_index,
    )


def _sample_two_types(sampler, edge_type, src, dst, src_time, dst_time, seed, disjoint):
    """Sample from sources of ``edge_type[0]`` and destinations of ``edge_type[-1]`` (two
    node types): ``(output, each source's position, each destination's position)``, each
    type's ends made unique unless ``disjoint``."""
    src_index = np.arange(src.shape[0], dtype=np.int64)
    dst_index = np.arange(dst.shape[0], dtype=np.int64)
    if not disjoint:
        src, src_index = np.unique(src, return_inverse=True)
        dst, dst_index = np.unique(dst, return_inverse=True)
    times = None
    if src_time is not None:
        times = {edge_type[0]: src_time, edge_type[-1]: dst_time}
    out = sampler.sample_from_typed_nodes({edge_type[0]: src, edge_type[-1]: dst}, seed, times)
    return out, src_index.astype(np.int64), dst_index.astype(np.int64)


def _trees_per_edge(out, num_pos: int):
    """``out`` with each node's tree taken modulo ``num_pos``, as PyG's ``edge_sample`` does.

    Trees are numbered over the sources (positives, then binary negatives), then the
    destinations. So a source's tree becomes its edge's; a destination's does too when the
    number of binary negatives is a multiple of ``num_pos`` (triplet, or a whole ``amount``),
    and is shifted by that remainder otherwise, exactly as in PyG. Sampling is unaffected:
    each tree samples with its own edge's time."""
    batch = out.batch
    if isinstance(batch, dict):
        batch = {t: b % max(num_pos, 1) for t, b in batch.items()}
    else:
        batch = batch % max(num_pos, 1)
    return dataclasses.replace(out, batch=batch)


def _check_count(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"'{name}' must be an int >= 0 (got {value!r})")
    return int(value)


def _check_side(num_nodes, by_time: NodesByTime | None, name: str, count: int) -> int:
    """A side's node count, checked against what the kernels draw and its nodes by time."""
    num_nodes = _check_count(num_nodes, name)
    if count and num_nodes == 0:
        raise ValueError(f"'{name}' is 0: no negative can be drawn among no nodes")
    if num_nodes > MAX_BOUND:
        raise ValueError(f"'{name}' above {MAX_BOUND} is not supported (got {num_nodes})")
    if by_time is not None and by_time.num_nodes != num_nodes:
        raise ValueError(
            f"the nodes by time of '{name}' hold {by_time.num_nodes} nodes (expected {num_nodes})"
        )
    return num_nodes


def _check_limits(times, count: int, sides) -> np.ndarray:
    """``times`` as int64 ``[count]`` when a side draws by time, else an empty array.

    Raises:
        ValueError: times missing or of the wrong shape, or one earlier than every node's of
            a side (no negative can be drawn for that edge).
    """
    timed = [side for side in sides if side is not None]
    if not timed:
        return np.empty(0, dtype=np.int64)
    if times is None:
        raise ValueError("drawing negatives by node time needs each negative's 'times'")
    limits = np.asarray(times)
    if limits.shape != (count,) or (limits.size and not np.issubdtype(limits.dtype, np.integer)):
        raise ValueError(
            f"'times' must be integer times of shape ({count},) (got {limits.dtype} array of "
            f"shape {limits.shape})"
        )
    limits = np.ascontiguousarray(limits, dtype=np.int64)
    for side in timed:
        if count and limits.min() < side.sorted_times[0]:
            raise ValueError(
                f"no node is as early as time {int(limits.min())}: no negative can be drawn "
                "for that edge"
            )
    return limits


def _edge_keys(edges: EdgeSet | None, num_src: int, num_dst: int) -> np.ndarray:
    """The sorted int64 keys ``source * num_dst + destination`` of ``edges`` for the kernels
    (empty: no exclusion); every drawn pair's key must fit in int64."""
    if edges is None:
        return np.empty(0, dtype=np.int64)
    if edges.num_nodes != num_dst:
        raise ValueError(
            f"the edge set keys pairs over {edges.num_nodes} destinations (expected {num_dst})"
        )
    if num_src * num_dst > np.iinfo(np.int64).max:
        raise ValueError(
            f"excluding true edges keys pairs as source * {num_dst} + destination, which "
            f"overflows int64 for {num_src} sources"
        )
    return edges.keys


def _running(
    weights: NegativeSampling | None, side: str, num_nodes: int, by_time: NodesByTime | None
) -> np.ndarray:
    """A side's running weights for the kernels (empty: uniform draws)."""
    if weights is None:
        return np.empty(0, dtype=np.float64)
    return weights.running_weights(side, num_nodes, by_time)


def _sorted_side(by_time: NodesByTime | None) -> tuple[np.ndarray, np.ndarray]:
    """A side's ``(order, sorted_times)`` for the kernels: empty arrays draw over all nodes."""
    if by_time is None:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty
    return by_time.order, by_time.sorted_times


def _check_ids(ids, num_nodes: int, name: str) -> np.ndarray:
    """Seed edges' ``row`` or ``col``: int64 ``[n]`` ids in ``[0, num_nodes)``."""
    array = _int_ids(ids, f"seed edges' '{name}'")
    _check_range(array, num_nodes, f"seed edges' '{name}'")
    return array


def _int_ids(ids, name: str) -> np.ndarray:
    """``ids`` as int64 ``[n]``; other dtypes (floats would truncate) and ranks refused."""
    array = np.asarray(ids)
    if array.size and not np.issubdtype(array.dtype, np.integer):
        raise TypeError(f"{name} must hold integer ids (got {array.dtype}: {array[:5]!r})")
    if array.ndim != 1:
        raise ValueError(f"{name} must be 1-D (got shape {array.shape})")
    return array.astype(np.int64, copy=False)


def _check_range(ids: np.ndarray, num_nodes: int, name: str) -> None:
    if ids.size and (ids.min() < 0 or ids.max() >= num_nodes):
        bad = int(ids.min()) if ids.min() < 0 else int(ids.max())
        raise ValueError(f"{name} holds node id {bad}, outside [0, {num_nodes})")
