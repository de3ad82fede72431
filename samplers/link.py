"""Sampling around seed edges (link prediction), as PyG's ``edge_sample``: negative edges
drawn as PyG draws them (optionally never a true edge), both ends of every edge sampled as
seed nodes by a node sampler, and the labels that say which seed is which.

NumPy in, NumPy out. Negatives come from a NumPy ``Generator`` seeded by the batch's seed, so a
batch depends on its seed only.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from samplers.base import BaseSampler, EdgeSamplerInput, SamplerInput, SamplerOutput
from samplers.seeds import mix_seed

NEGATIVE_MODES = ("binary", "triplet")
# Rounds of redrawing negatives that are true edges before giving up.
MAX_REDRAWS = 100


@dataclass(frozen=True)
class NegativeSampling:
    """How to draw negative edges, as PyG's ``NegativeSampling``.

    Attributes:
        mode: ``'binary'`` (``amount`` random node pairs per positive edge, labelled 0) or
            ``'triplet'`` (``amount`` random destinations per positive edge, an integer).
        amount: negatives per positive edge (> 0).
        exclude_edges: never draw a pair that is an edge of the graph (graphengine's option;
            PyG draws uniformly over all pairs, true edges included).
    """

    mode: str
    amount: float = 1
    exclude_edges: bool = False

    def __post_init__(self):
        mode = getattr(self.mode, "value", self.mode)  # PyG's NegativeSamplingMode
        if mode not in NEGATIVE_MODES:
            raise ValueError(
                f"negative sampling 'mode' must be one of {NEGATIVE_MODES} (got {mode!r})"
            )
        object.__setattr__(self, "mode", mode)
        if not self.amount > 0:
            raise ValueError(f"negative sampling 'amount' must be positive (got {self.amount})")
        if mode == "triplet":
            if self.amount != math.ceil(self.amount):
                raise ValueError(
                    f"'triplet' negative sampling takes an integer 'amount' (got {self.amount})"
                )
            object.__setattr__(self, "amount", int(self.amount))

    @classmethod
    def cast(cls, value) -> NegativeSampling | None:
        """``None``, a mode string, a ``NegativeSampling`` (graphengine's or PyG's, whose
        node weights are refused: draws are uniform here)."""
        if value is None or isinstance(value, cls):
            return value
        if isinstance(value, str):
            return cls(value)
        if (
            getattr(value, "src_weight", None) is not None
            or getattr(value, "dst_weight", None) is not None
        ):
            raise NotImplementedError(
                "negative sampling with node weights (src_weight / dst_weight) is not supported: "
                "negatives are drawn uniformly"
            )
        return cls(value.mode, value.amount)


@dataclass(frozen=True)
class LinkSamplerOutput:
    """The subgraph around a batch of seed edges, and what PyG's link loader puts in the
    batch besides it.

    Attributes:
        subgraph: the node sampler's output for the seed nodes (both ends of every edge,
            negatives included; each once, unless disjoint).
        input_id: int64 ``[num_pos]``, each positive edge's ``input_id``.
        edge_label_index: int64 ``[2, num_pos + num_neg]``, binary (or no) negatives: each
            edge's ends as positions in ``subgraph.node``.
        edge_label: ``[num_pos + num_neg]`` labels (binary: 0 for negatives), or ``None``.
        edge_label_time: int64, each labelled edge's time, or ``None``.
        src_index, dst_pos_index: int64 ``[num_pos]``, triplet: the ends of each positive edge.
        dst_neg_index: int64 ``[num_pos]`` or ``[num_pos, amount]``, triplet: its negatives.
    """

    subgraph: SamplerOutput
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
    """

    def __init__(self, node_time: np.ndarray):
        node_time = np.asarray(node_time, dtype=np.int64)
        self.order = np.argsort(node_time, kind="stable").astype(np.int64)
        self.sorted_times = node_time[self.order]

    def draw(self, rng: np.random.Generator, times: np.ndarray) -> np.ndarray:
        """One node per entry of ``times`` (int64), uniform over the nodes no later than it.

        Raises:
            ValueError: a time earlier than every node's.
        """
        allowed = np.searchsorted(self.sorted_times, times, side="right")
        if allowed.size and allowed.min() == 0:
            raise ValueError(
                f"no node is as early as time {int(times[np.argmin(allowed)])}: no negative "
                "can be drawn for that edge"
            )
        return self.order[(rng.random(times.shape[0]) * allowed).astype(np.int64)]


class EdgeSet:
    """The edges of a graph as sorted keys ``source * num_nodes + destination`` (int64), for
    membership tests of drawn pairs."""

    def __init__(self, row: np.ndarray, col: np.ndarray, num_nodes: int):
        self.num_nodes = int(num_nodes)
        self.keys = np.unique(
            np.asarray(row, np.int64) * self.num_nodes + np.asarray(col, np.int64)
        )

    def contains(self, row: np.ndarray, col: np.ndarray) -> np.ndarray:
        """bool, the shape of ``row``: whether each ``(row, col)`` is an edge."""
        keys = row * self.num_nodes + col
        at = np.searchsorted(self.keys, keys)
        found = at < self.keys.shape[0]
        found[found] = self.keys[at[found]] == keys[found]
        return found


def sample_from_edges(
    sampler: BaseSampler,
    inputs: EdgeSamplerInput,
    num_nodes: int,
    negative: NegativeSampling | None = None,
    disjoint: bool = False,
    nodes_by_time: NodesByTime | None = None,
    edges: EdgeSet | None = None,
) -> LinkSamplerOutput:
    """The subgraph around ``inputs``' edges (homogeneous), as PyG's ``edge_sample``.

    Binary negatives: ``ceil(num_pos * amount)`` pairs, sources and destinations uniform over
    the nodes; labels are the input's (or ones) then zeros. Triplet: ``amount`` uniform
    destinations per positive edge. With ``nodes_by_time`` and seed times (``inputs.time``),
    a negative node is drawn uniformly among those no later than its edge's time. With
    ``negative.exclude_edges``, never a pair in ``edges`` (redrawn: uniform over the pairs
    left). The seed nodes are
    every edge's ends, each once unless ``disjoint`` (temporal seeds are disjoint), sampled by
    ``sampler.sample_from_nodes`` with the edges' times.

    Raises:
        ValueError: a node id outside ``[0, num_nodes)``, or no allowed negative for an edge
            after :data:`MAX_REDRAWS` rounds (say, a node linked to every other).
    """
    src = _check_ids(inputs.row, num_nodes, "row")
    dst = _check_ids(inputs.col, num_nodes, "col")
    num_pos = src.shape[0]
    label, time = inputs.label, inputs.time
    src_time = dst_time = time
    disjoint = disjoint or time is not None
    rng = np.random.default_rng(mix_seed(inputs.seed, 1 << 41))
    if negative is not None and negative.mode == "binary":
        num_neg = math.ceil(num_pos * negative.amount)
        repeats = 1 + math.ceil(negative.amount)
        pair_time = None if time is None else np.tile(time, repeats)[num_pos : num_pos + num_neg]
        src_neg, dst_neg = _draw_pairs(rng, num_neg, num_nodes, pair_time, nodes_by_time, edges)
        src, dst = np.concatenate([src, src_neg]), np.concatenate([dst, dst_neg])
        label = np.ones(num_pos, dtype=np.float32) if label is None else np.asarray(label)
        label = np.concatenate([label, np.zeros((num_neg, *label.shape[1:]), dtype=label.dtype)])
        if time is not None:
            src_time = dst_time = np.tile(time, repeats)[: num_pos + num_neg]
    elif negative is not None:  # triplet
        sources = np.repeat(src, negative.amount)
        neg_time = None if time is None else np.repeat(time, negative.amount)
        dst_neg = _draw_destinations(rng, sources, num_nodes, neg_time, nodes_by_time, edges)
        dst_neg = dst_neg.reshape(num_pos, negative.amount).T.reshape(-1)  # PyG's layout
        dst = np.concatenate([dst, dst_neg])
        if time is not None:
            dst_time = np.tile(time, 1 + negative.amount)

    seeds = np.concatenate([src, dst])
    if not disjoint:
        seeds, inverse = np.unique(seeds, return_inverse=True)
    seed_time = None if time is None else np.concatenate([src_time, dst_time])
    out = sampler.sample_from_nodes(
        SamplerInput(seeds, np.arange(seeds.shape[0], dtype=np.int64), inputs.seed, seed_time)
    )
    if disjoint:
        out = dataclasses.replace(out, batch=out.batch % max(num_pos, 1))
    input_id = np.asarray(inputs.input_id, dtype=np.int64)
    if negative is None or negative.mode == "binary":
        index = np.arange(seeds.shape[0], dtype=np.int64) if disjoint else inverse
        return LinkSamplerOutput(
            out, input_id, index.reshape(2, -1), label, None if time is None else src_time
        )
    index = np.arange(seeds.shape[0], dtype=np.int64) if disjoint else inverse.astype(np.int64)
    dst_neg_index = index[2 * num_pos :].reshape(-1, num_pos).T  # [num_pos, amount]
    if dst_neg_index.shape[1] == 1:  # as torch's squeeze(-1)
        dst_neg_index = dst_neg_index[:, 0]
    return LinkSamplerOutput(
        out,
        input_id,
        edge_label_time=None if time is None else src_time,
        src_index=index[:num_pos],
        dst_pos_index=index[num_pos : 2 * num_pos],
        dst_neg_index=dst_neg_index,
    )


def _draw_nodes(rng, count, num_nodes, times, nodes_by_time) -> np.ndarray:
    """``count`` nodes, uniform over all or, with times, over those no later than each."""
    if times is None or nodes_by_time is None:
        return rng.integers(0, num_nodes, count)
    return nodes_by_time.draw(rng, times)


def _draw_pairs(rng, count, num_nodes, times, nodes_by_time, edges):
    """``count`` (source, destination) pairs, each end uniform over the nodes allowed; pairs
    in ``edges`` (when given) redrawn."""
    src = _draw_nodes(rng, count, num_nodes, times, nodes_by_time)
    dst = _draw_nodes(rng, count, num_nodes, times, nodes_by_time)
    for _ in range(MAX_REDRAWS):
        bad = np.zeros(count, dtype=bool) if edges is None else edges.contains(src, dst)
        if not bad.any():
            return src, dst
        again = None if times is None else times[bad]
        src[bad] = _draw_nodes(rng, int(bad.sum()), num_nodes, again, nodes_by_time)
        dst[bad] = _draw_nodes(rng, int(bad.sum()), num_nodes, again, nodes_by_time)
    raise ValueError(f"no negative pair that is not an edge found for {int(bad.sum())} edges")


def _draw_destinations(rng, sources, num_nodes, times, nodes_by_time, edges):
    """A destination for each of ``sources``, uniform over the nodes allowed; pairs in
    ``edges`` (when given) redrawn."""
    count = sources.shape[0]
    dst = _draw_nodes(rng, count, num_nodes, times, nodes_by_time)
    for _ in range(MAX_REDRAWS):
        bad = np.zeros(count, dtype=bool) if edges is None else edges.contains(sources, dst)
        if not bad.any():
            return dst
        again = None if times is None else times[bad]
        dst[bad] = _draw_nodes(rng, int(bad.sum()), num_nodes, again, nodes_by_time)
    first = int(sources[np.argmax(bad)])
    raise ValueError(
        f"no negative destination that is not an edge found for source {first} (it may link "
        "to every node it may)"
    )


def _check_ids(ids, num_nodes: int, name: str) -> np.ndarray:
    array = np.asarray(ids, dtype=np.int64)
    if array.size and (array.min() < 0 or array.max() >= num_nodes):
        bad = int(array.min()) if array.min() < 0 else int(array.max())
        raise ValueError(f"seed edges' '{name}' holds node id {bad}, outside [0, {num_nodes})")
    return array
