"""What each candidate moves and holds per worker, counted from sampled batches.

Every figure here is a count (rows, bytes, steps), never a time: :mod:`.cost_model` turns
them into seconds with the rates :mod:`.probes` measures. The formulas of the bytes that
cross workers are the ones the strategies' counters follow (``graphengine train``'s
``traffic`` and ``partition`` metrics):

- gradients: each worker's DDP buckets hold ``4 P`` bytes of a model of ``P`` float32
  parameters trained replicated (hybrid: those after the first layer's weights); a ring
  all-reduce sends ``2 (W-1)/W`` of them;
- hybrid's first-layer structure, all-gathered: ``(W-1) (8 n_src + 4 E + 4 (n_dst + 1) + 24)``
  bytes (ids int64, edges and pointers int32 padded to int64, a three-int64 header);
- hybrid's partial results, forward, and their gradients, backward: ``2 (W-1) n_dst H 4``;
- features partitioned by rows over ``W`` workers without a cache: ``(W-1)/W n_src F 4`` of
  remote rows (the share a worker's batch finds on other parts when parts are random).

``n_src``: a worker's batch nodes, ``n_dst``: its first layer's destinations (all hops but
the last), ``E``: its edges, ``F``/``H``: feature/hidden width, ``W``: workers.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

#: DDP's default bucket capacities: the first bucket (the last layers' gradients, ready
#: first in backward) and every later one.
DDP_FIRST_BUCKET_BYTES = 1024 * 1024
DDP_BUCKET_BYTES = 25 * 1024 * 1024
FLOAT_BYTES = 4


@dataclass(frozen=True)
class BatchCounts:
    """Means over sampled batches of ``seeds`` seeds: ``n_src`` nodes, ``n_dst`` first-layer
    destinations, ``edges``, ``hops``: per layer ``(n_dst_l, edges_l)`` of the blocks the
    model runs (first layer first), ``structure_bytes``: one packed first layer
    (:func:`~graphengine.loader.hybrid_loader.pack_first_layer`), ``sampled_edges``: edges
    the sampler drew. Partitioned batches also count ``remote_rows``: rows other parts own."""

    seeds: int
    n_src: float
    n_dst: float
    edges: float
    hops: tuple[tuple[float, float], ...]
    structure_bytes: float
    remote_rows: float = 0.0

    @property
    def sampled_edges(self) -> float:
        return self.edges


def structure_bytes(n_src: float, n_dst: float, edges: float) -> float:
    """Bytes of one packed first layer: header, ids, edges and pointers (int32 pairs)."""
    local = edges + n_dst + 1
    return 8 * (3 + n_src) + 8 * math.ceil(local / 2)


def traffic_formulas(workers: int, counts: dict, params: dict, width: int, hidden: int) -> dict:
    """Bytes one worker sends per step (see the module's docstring): ``counts`` holds
    ``n_src``, ``n_dst`` and ``edges``, ``params`` ``all`` and ``after_first_weights``."""
    w, n_src, n_dst, edges = workers, counts["n_src"], counts["n_dst"], counts["edges"]
    return {
        "data_remote_features": (w - 1) / w * n_src * width * FLOAT_BYTES,
        "data_gradients": ring_bytes(FLOAT_BYTES * params["all"], w),
        "hybrid_structure": (w - 1) * structure_bytes(n_src, n_dst, edges),
        "hybrid_partials": 2 * (w - 1) * n_dst * hidden * FLOAT_BYTES,
        "hybrid_gradients": ring_bytes(FLOAT_BYTES * params["after_first_weights"], w),
    }


def ddp_buckets(parameter_bytes: list[int]) -> list[int]:
    """Bytes of each gradient bucket DDP forms from parameters of ``parameter_bytes`` (in
    the model's order), in the order backward fills them: parameters in reverse, a bucket
    closed once it reaches its cap, :data:`DDP_FIRST_BUCKET_BYTES` for the first and
    :data:`DDP_BUCKET_BYTES` for the others (``compute_bucket_assignment_by_size``)."""
    buckets, current, cap = [], 0, DDP_FIRST_BUCKET_BYTES
    for size in reversed(parameter_bytes):
        current += size
        if current >= cap:
            buckets.append(current)
            current, cap = 0, DDP_BUCKET_BYTES
    if current:
        buckets.append(current)
    return buckets


@dataclass
class Memory:
    """Bytes one worker holds: ``features``, ``graph`` (structure and labels), ``cache``
    (remote rows), and on a GPU ``device`` (the model, its optimizer state, a batch in
    flight and its activations)."""

    features: int = 0
    graph: int = 0
    cache: int = 0
    device: int = 0

    @property
    def host(self) -> int:
        return self.features + self.graph + self.cache


@dataclass
class Volumes:
    """One candidate's counts, per worker and step unless named otherwise.

    Attributes:
        name: the candidate.
        workers: ``W``.
        steps: steps per epoch.
        counts: the batch this worker samples (:class:`BatchCounts`).
        flops: multiply-adds of the model's layers, forward and backward, that this worker
            computes (hybrid: its columns of every worker's first layer, its own later
            layers).
        gathered_rows, gathered_bytes: feature rows (and their bytes) read into batches,
            from this worker's memory.
        remote_rows: rows of other workers' nodes a batch reads (partitioned), before the
            cache; ``cache_hit_rate``: the share of them the cache serves; ``fetched_bytes``:
            bytes sent by others for the rest (rows and their ids).
        sampling_bytes: bytes the distributed sampler exchanges (partitioned).
        structure_bytes, partial_bytes: hybrid's first-layer structures and partial results
            sent to other workers.
        gradient_bytes: this worker's DDP buckets (what ``train`` counts as ``gradient_bytes``);
            ``gradient_buckets``: their sizes, in the order backward fills them.
        setup_bytes: sent once before training (hybrid on partitions: the feature columns).
        memory: what a worker holds (:class:`Memory`).
    """

    name: str
    workers: int
    steps: int
    counts: BatchCounts
    flops: float
    gathered_rows: float
    gathered_bytes: float
    gradient_bytes: float
    gradient_buckets: list[int]
    memory: Memory
    remote_rows: float = 0.0
    cache_hit_rate: float = 0.0
    fetched_bytes: float = 0.0
    sampling_bytes: float = 0.0
    structure_bytes: float = 0.0
    partial_bytes: float = 0.0
    setup_bytes: float = 0.0

    def as_dict(self) -> dict:
        out = asdict(self)
        out["counts"] = asdict(self.counts)
        out["memory"] = {**asdict(self.memory), "host": self.memory.host}
        return out


def count_batches(batches: list, whole: bool, remote=None) -> BatchCounts:
    """:class:`BatchCounts` of sampled PyG batches (``num_sampled_nodes`` and
    ``num_sampled_edges`` per hop, ``edge_index`` sorted by destination, ``n_id``).

    ``whole``: the model's first layer computes every node (see
    :func:`~graphengine.loader.hybrid_loader.first_layer_dst`). ``remote``: a function of
    ``n_id`` (int64 ``[n]``) -> bool ``[n]``, the rows other workers own.
    """
    if not batches:
        raise ValueError("'batches' must hold at least one sampled batch")
    n_src, n_dst, edges, struct, remote_rows, seeds = [], [], [], [], [], []
    hops = []
    for batch in batches:
        nodes = np.asarray(batch.num_sampled_nodes, dtype=np.int64)
        hop_edges = np.asarray(batch.num_sampled_edges, dtype=np.int64)
        src, dst, e = int(nodes.sum()), int(nodes[:-1].sum()), int(hop_edges.sum())
        if whole:
            dst = src
        n_src.append(src)
        n_dst.append(dst)
        edges.append(e)
        struct.append(structure_bytes(src, dst, e))
        seeds.append(int(batch.batch_size))
        # Layer l (of L) computes the nodes of hops < L - l from the edges of hops < L - l.
        layers = len(hop_edges)
        hops.append(
            [
                (float(nodes[: layers - layer].sum()), float(hop_edges[: layers - layer].sum()))
                for layer in range(layers)
            ]
        )
        if remote is not None:
            remote_rows.append(int(np.count_nonzero(remote(batch.n_id.numpy()))))
    mean_hops = tuple(
        (float(np.mean([h[i][0] for h in hops])), float(np.mean([h[i][1] for h in hops])))
        for i in range(len(hops[0]))
    )
    if whole:
        mean_hops = tuple((float(np.mean(n_src)), e) for _, e in mean_hops)
    return BatchCounts(
        seeds=int(max(seeds)),
        n_src=float(np.mean(n_src)),
        n_dst=float(np.mean(n_dst)),
        edges=float(np.mean(edges)),
        hops=mean_hops,
        structure_bytes=float(np.mean(struct)),
        remote_rows=float(np.mean(remote_rows)) if remote_rows else 0.0,
    )


def layer_flops(counts: BatchCounts, widths: list[int], first_share: float = 1.0) -> float:
    """Multiply-adds of a message-passing model's layers on one batch, forward and backward
    (backward: twice the forward's): per layer ``l`` of input width ``widths[l]`` and output
    ``widths[l + 1]``, ``E_l in`` for the aggregation and ``2 n_dst_l in out`` for the two
    weight products (GraphSAGE's root and neighbor weights; GCN's and GIN's one weight
    counts alike, the ratio of candidates being what matters). ``first_share``: the share of
    the first layer's input columns computed (hybrid: ``1/W``)."""
    total = 0.0
    for layer, (n_dst, edges) in enumerate(counts.hops):
        d_in, d_out = widths[layer], widths[layer + 1]
        share = first_share if layer == 0 else 1.0
        total += share * (edges * d_in + 2 * n_dst * d_in * d_out)
    return 3 * total


def steps_per_epoch(train_nodes: int, worker_batch: int, workers: int) -> int:
    """Steps of an epoch when ``workers`` split every step's ``workers * worker_batch`` seeds
    out of ``train_nodes`` (each worker takes its share of the epoch's order)."""
    share = -(-train_nodes // workers)
    return -(-share // worker_batch)


def ring_bytes(buffer_bytes: float, workers: int) -> float:
    """Bytes a worker sends in a ring all-reduce of ``buffer_bytes``."""
    return 2 * (workers - 1) / workers * buffer_bytes


def cache_hit_rate(access_counts: np.ndarray, capacity: int) -> float:
    """The share of reads of remote rows that a cache of the ``capacity`` most read rows
    serves, from a pre-sampled epoch's ``access_counts`` (one count per remote row read)."""
    if capacity <= 0 or access_counts.size == 0:
        return 0.0
    ranked = np.sort(np.asarray(access_counts, dtype=np.int64))[::-1]
    return float(ranked[:capacity].sum() / ranked.sum())
