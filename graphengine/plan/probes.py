"""Rates measured in the real process group: every worker runs each probe at the same time
(a barrier before each), so what workers sharing a machine take from each other is inside
the figures.

Each probe times the code training runs, on real batches of the run's per-worker size:

- sampling: this worker's loader's ``sample`` stage (the distributed sampler's for a part),
  as sampled edges per second;
- gathering: its ``gather`` stage (feature bytes per second into a batch), and hybrid's
  gather of this worker's columns of every worker's first-layer inputs;
- compute: the model's layers forward and backward and the optimizer's step on those
  batches, replicated (data parallelism) and split as hybrid runs it (this worker's ``F/W``
  input columns of the first layer over every worker's blocks, then its own later layers),
  as multiply-adds per second (:func:`~graphengine.plan.volumes.layer_flops`);
- the link: ``all_reduce`` and ``all_to_all`` of a few sizes over the default group, a
  latency and a bandwidth for each by least squares;
- memory: the host memory available to each of this machine's workers, and the GPU's.
"""

from __future__ import annotations

import copy
import os
import time
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

from graphengine.batch.hybrid import HybridBatch
from graphengine.data.columns import FeatureColumns, column_ranges
from graphengine.loader.hybrid_loader import pack_first_layer, unpack_first_layer
from graphengine.loader.threads import sampler_threads
from graphengine.nn.column_layers import split_first_layer
from graphengine.nn.forward import SeedLogits
from graphengine.parallel.data_parallel import collective_device
from graphengine.parallel.hybrid import HybridRest, runs_whole

#: Payload bytes per worker of the link probe's collectives.
LINK_SIZES = (1 << 12, 1 << 18, 1 << 21, 1 << 23)
LINK_REPEATS = 3
#: Batches each probe runs untimed before it times any.
WARM_BATCHES = 2


@dataclass
class Rates:
    """What the probes measured on this worker (the slowest worker's, once agreed).

    Attributes:
        sample_edges_per_s: sampled edges per second of the sampler training uses.
        gather_bytes_per_s: feature bytes per second gathered into a batch (whole rows).
        column_gather_bytes_per_s: the same for hybrid's columns (``F/W`` of each row).
        compute_flops_per_s: multiply-adds per second of a replicated step (forward,
            backward, optimizer).
        hybrid_compute_flops_per_s: the same for hybrid's split step (no exchange).
        allreduce_latency_s, allreduce_bytes_per_s: an all-reduce's fixed seconds and the
            bytes per second a worker sends in its ring (``2 (W-1)/W`` of the buffer).
        alltoall_latency_s, alltoall_bytes_per_s: an all-to-all's fixed seconds and bytes
            per second a worker sends to the others.
        host_memory_bytes: host memory available per worker on this machine.
        gpu_memory_bytes: the GPU's memory (0 on the CPU).
        cores_per_worker: this machine's cores over its workers.
        compute_threads, sampler_threads, gather_threads: the threads each of these runs on.
        dist_sample_edges_per_s: the distributed sampler's edges per second (partitions).
        seconds: how long the probes took.
    """

    sample_edges_per_s: float = 0.0
    gather_bytes_per_s: float = 0.0
    column_gather_bytes_per_s: float = 0.0
    compute_flops_per_s: float = 0.0
    hybrid_compute_flops_per_s: float = 0.0
    allreduce_latency_s: float = 0.0
    allreduce_bytes_per_s: float = float("inf")
    alltoall_latency_s: float = 0.0
    alltoall_bytes_per_s: float = float("inf")
    host_memory_bytes: int = 0
    gpu_memory_bytes: int = 0
    cores_per_worker: float = 1.0
    compute_threads: int = 1
    sampler_threads: int = 1
    gather_threads: int = 1
    dist_sample_edges_per_s: float = 0.0
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class BatchShape:
    """What counting needs of a sampled batch: per-hop ``num_sampled_nodes`` and
    ``num_sampled_edges``, ``batch_size`` and the node ids ``n_id`` (int64)."""

    num_sampled_nodes: list
    num_sampled_edges: list
    batch_size: int
    n_id: torch.Tensor

    @classmethod
    def of(cls, batch) -> BatchShape:
        return cls(
            list(batch.num_sampled_nodes),
            list(batch.num_sampled_edges),
            int(batch.batch_size),
            batch.n_id.clone(),
        )


@dataclass
class Probed:
    """What :func:`probe_batches` measured: ``batches``, every batch sampled (for counting);
    the replicated pass's ``timed`` batches with their ``sample_s``, ``gather_s`` and
    ``gathered_bytes`` (the loader's stages; ``fetch`` on a part) and ``data_s``; the
    hybrid pass's ``hybrid_timed`` batches with their ``hybrid_s``, ``column_gather_s`` and
    ``column_bytes``."""

    batches: list = field(default_factory=list)
    timed: list = field(default_factory=list)
    hybrid_timed: list = field(default_factory=list)
    sample_s: list = field(default_factory=list)
    gather_s: list = field(default_factory=list)
    gathered_bytes: list = field(default_factory=list)
    data_s: list = field(default_factory=list)
    hybrid_s: list = field(default_factory=list)
    column_gather_s: list = field(default_factory=list)
    column_bytes: list = field(default_factory=list)


def median_rate(amounts, seconds) -> float:
    """The median of ``amount / seconds`` over timed batches: one batch slowed by another
    process moves a median less than a sum."""
    ratios = [a / max(s, 1e-9) for a, s in zip(amounts, seconds, strict=True)]
    return float(np.median(ratios)) if ratios else 0.0


def agree(rates: Rates) -> Rates:
    """Every worker's rates -> the slowest worker's (each rate's minimum, each latency's
    maximum): a step waits for the slowest."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return rates
    every = [None] * dist.get_world_size()
    dist.all_gather_object(every, rates.as_dict())
    agreed = {}
    for key in rates.as_dict():
        values = [r[key] for r in every]
        slowest = max if key.endswith("latency_s") or key == "seconds" else min
        agreed[key] = slowest(values)
    return Rates(**agreed)


def machine(rates: Rates, device: torch.device) -> None:
    """Fill ``rates``' memory, cores and threads from this machine."""
    import psutil

    local_workers = int(os.environ.get("LOCAL_WORLD_SIZE", 1))
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    rates.host_memory_bytes = int(psutil.virtual_memory().available // local_workers)
    rates.cores_per_worker = cores / local_workers
    rates.compute_threads = torch.get_num_threads()
    rates.sampler_threads = sampler_threads(1)
    rates.gather_threads = torch.get_num_threads()
    if device.type == "cuda":
        rates.gpu_memory_bytes = int(torch.cuda.get_device_properties(device).total_memory)


def _barrier() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.barrier()


def probe_batches(
    loader,
    gather_stage: str,
    model: torch.nn.Module,
    dataset,
    workers: int,
    whole: bool,
    count: int,
    warm: int = WARM_BATCHES,
) -> Probed:
    """Run batches of ``loader`` (``num_workers=0``: its stages in this thread, over as many
    epochs as it takes) as training would: one pass of ``warm + count`` batches each through
    a replicated step of ``model``, then, with 2 or more ``workers``, one of as many through
    a hybrid step (this worker's columns of its batch and of the ``workers - 1`` before it,
    standing in for the other workers' batches); every stage and step after the first
    ``warm`` of a pass timed.

    A pass samples its batches first and steps them after, each kind of step in a pass of
    its own: sampling threads still busy when a step starts, or steps of other shapes
    before it, slow it, and the cost model accounts for the loader's threads itself.
    :attr:`Probed.batches` keeps each batch's :class:`BatchShape` only.
    """
    rank = dist.get_rank() if workers > 1 else 0
    start, stop = column_ranges(dataset.num_features, workers)[rank]
    out = Probed()
    passes = [("data", replicated_step(model, dataset, len(model.convs)))]
    columns = None
    if workers > 1:
        table = getattr(dataset, "x", None)
        columns = None if table is None else FeatureColumns.from_table(table, start, stop)
        passes.append(("hybrid", hybrid_step(model, dataset, (start, stop), workers)))
    epoch = 0
    for mode, step in passes:
        batches = []
        _barrier()
        while len(batches) < warm + count:
            loader.set_epoch(epoch)
            epoch += 1
            before = loader.stage_times
            for batch in loader:
                now = loader.stage_times
                if mode == "data" and len(batches) >= warm:
                    out.sample_s.append(now["sample"] - before["sample"])
                    out.gather_s.append(now[gather_stage] - before[gather_stage])
                    out.gathered_bytes.append(batch.x.numel() * batch.x.element_size())
                batches.append(batch)
                out.batches.append(BatchShape.of(batch))
                before = loader.stage_times
                if len(batches) == warm + count:
                    break
        shapes = out.batches[-len(batches) :]
        for i, batch in enumerate(batches):
            if mode == "hybrid":
                group = [batches[(i - j) % len(batches)] for j in range(workers)]
                group[0], group[rank] = group[rank], group[0]
                started = time.perf_counter()
                batch = _hybrid_batch(group, rank, whole, columns, start, stop)
                if i >= warm and columns is not None:
                    out.column_gather_s.append(time.perf_counter() - started)
                    out.column_bytes.append(sum(x.numel() * 4 for x in batch.inputs))
            seconds = _timed(step, batch)
            if i >= warm:
                getattr(out, f"{mode}_s").append(seconds)
                (out.timed if mode == "data" else out.hybrid_timed).append(shapes[i])
    return out


def _timed(step, batch) -> float:
    """Seconds of ``step(batch)``, the workers starting it together."""
    _barrier()
    started = time.perf_counter()
    step(batch)
    return time.perf_counter() - started


def _hybrid_batch(group: list, rank: int, whole: bool, columns, start: int, stop: int):
    """A :class:`HybridBatch` of worker ``rank`` whose workers' batches are ``group``, with
    this worker's columns ``[start, stop)`` gathered from ``columns`` (a part without the
    whole table: sliced from the batches' own ``x``)."""
    layers = [unpack_first_layer(pack_first_layer(b, whole)) for b in group]
    if columns is None:
        inputs = [b.x[:, start:stop].contiguous() for b in group]
    else:
        rows = columns.gather(torch.cat([n_id for n_id, _ in layers]))
        inputs = list(torch.split(rows, [block.num_src for _, block in layers]))
    own = copy.copy(group[rank])
    own.x = None
    return HybridBatch(own, inputs, [block for _, block in layers], rank)


def _labels(dataset, batch) -> torch.Tensor:
    y = getattr(batch, "y", None)
    if y is None:
        y = torch.as_tensor(dataset.y)[batch.n_id]
    return y[: batch.batch_size].long()


def replicated_step(model: torch.nn.Module, dataset, hops: int):
    """An optimizer step of a copy of ``model`` on a batch: forward, loss, backward, Adam."""
    module = SeedLogits(copy.deepcopy(model), hops)
    optimizer = torch.optim.Adam(module.parameters(), lr=1e-3)
    module.train()

    def step(batch) -> None:
        optimizer.zero_grad()
        loss = F.cross_entropy(module(batch), _labels(dataset, batch))
        loss.backward()
        optimizer.step()

    return step


def hybrid_step(model: torch.nn.Module, dataset, columns: tuple[int, int], workers: int):
    """A hybrid optimizer step of a copy of ``model`` on a :class:`HybridBatch`: this
    worker's ``columns`` of the first layer over every worker's block, the sum of
    ``workers`` partials of its own, its later layers, backward, Adam. No exchange."""
    model = copy.deepcopy(model)
    seed_logits = SeedLogits(model, len(model.convs))
    first = split_first_layer(model.convs[0], *columns)
    rest = HybridRest(model, runs_whole(seed_logits))
    parameters = [*first.parameters(), *rest.parameters()]
    optimizer = torch.optim.Adam(parameters, lr=1e-3)
    first.train()
    rest.train()

    def step(batch: HybridBatch) -> None:
        optimizer.zero_grad()
        partials = [first(x, block) for x, block in zip(batch.inputs, batch.blocks, strict=True)]
        own = partials[batch.rank]
        h = torch.stack([own] * workers).sum(0)
        logits = rest(h, batch)
        loss = F.cross_entropy(logits, _labels(dataset, batch.batch))
        loss.backward()
        optimizer.step()

    return step


def probe_link(device: torch.device) -> dict:
    """Latency (s) and bandwidth (bytes/s a worker sends) of ``all_reduce`` and
    ``all_to_all`` over the default group, least squares over :data:`LINK_SIZES`."""
    workers = dist.get_world_size()
    on = collective_device(str(dist.get_backend()), device)
    out = {}
    for name in ("allreduce", "alltoall"):
        sent, seconds = [], []
        for size in LINK_SIZES:
            tensor = torch.ones(size // 4, dtype=torch.float32, device=on)
            out_tensor = torch.empty_like(tensor)
            timings = []
            for _ in range(LINK_REPEATS + 1):
                dist.barrier()
                started = time.perf_counter()
                if name == "allreduce":
                    dist.all_reduce(tensor)
                else:
                    dist.all_to_all_single(out_tensor, tensor)
                if on.type == "cuda":
                    torch.cuda.synchronize(on)
                timings.append(time.perf_counter() - started)
            ring = 2 * (workers - 1) / workers if name == "allreduce" else (workers - 1) / workers
            sent.append(size * ring)
            seconds.append(float(np.median(timings[1:])))
        latency, per_byte = _line(np.array(sent), np.array(seconds))
        out[f"{name}_latency_s"] = latency
        out[f"{name}_bytes_per_s"] = 1.0 / per_byte
    return out


def _line(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """``(intercept, slope)`` of the least-squares line through ``(x, y)``, both kept
    positive (a latency below zero or a slope of zero is noise)."""
    slope, intercept = np.polyfit(x, y, 1)
    slope = max(float(slope), float((y.max() - y.min()) / max(x.max() - x.min(), 1.0)) / 10, 1e-15)
    return max(float(intercept), 0.0), slope
