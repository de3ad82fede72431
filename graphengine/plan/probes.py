"""Rates measured in the real process group: every worker runs each probe at the same time
(a barrier before each), so what workers sharing a machine take from each other is inside
the figures.

Each probe times the code training runs, on real batches of the run's per-worker size, with
the loader's stages in their threads beside the steps as in training (a pass of a few
batches per kind of step, :func:`probe_pass`):

- sampling: this worker's loader's ``sample`` stage (the distributed sampler's for a part),
  as sampled edges per second;
- gathering: its ``gather`` stage (feature bytes per second into a batch), and hybrid's
  loader's gather of this worker's columns of every worker's first-layer inputs;
- compute: the model's layers forward and backward and the optimizer's step on those
  batches, replicated (data parallelism) and split as hybrid runs it (this worker's ``F/W``
  input columns of the first layer over every worker's blocks, then its own later layers,
  without the partial results' exchange), as multiply-adds per second
  (:func:`~graphengine.plan.volumes.layer_flops`);
- the link: ``all_reduce`` and ``all_to_all`` of a few sizes over the default group, a
  latency and a bandwidth for each by least squares;
- memory: the host memory available to each of this machine's workers, and the GPU's.
"""

from __future__ import annotations

import copy
import os
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

from graphengine.batch.hybrid import HybridBatch
from graphengine.data.memory import available_memory
from graphengine.distributed.launch import host_cores
from graphengine.loader.threads import sampler_threads
from graphengine.nn.column_layers import split_first_layer
from graphengine.nn.forward import SeedLogits
from graphengine.parallel.data_parallel import collective_device
from graphengine.parallel.hybrid import HybridRest, runs_whole
from graphengine.plan.volumes import ring_bytes

#: Payload bytes per worker of the link probe's collectives.
LINK_SIZES = (1 << 12, 1 << 18, 1 << 21, 1 << 23)
LINK_REPEATS = 3
#: Batches each probe runs untimed before it times any, and after.
WARM_BATCHES = 2
TAIL_BATCHES = 3


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
        partial_bytes_per_s: bytes per second of hybrid's partial results' all-to-all as
            hybrid steps send it, amid their loader's threads (0: not probed).
        gradient_bytes_per_s: the same for the gradients' all-reduce of replicated steps
            (the ring's bytes a worker sends; 0: not probed).
        host_memory_bytes: host memory available per worker on this machine.
        gpu_memory_bytes: the GPU's memory (0 on the CPU).
        cores_per_worker: this machine's cores over its workers.
        compute_threads, sampler_threads, gather_threads: the threads each of these runs on.
        dist_sample_edges_per_s: the distributed sampler's edges per second (partitions).
        dist_compute_flops_per_s: a replicated step's multiply-adds per second beside the
            distributed loader's threads (partitions; 0: not probed).
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
    partial_bytes_per_s: float = 0.0
    gradient_bytes_per_s: float = 0.0
    host_memory_bytes: int = 0
    gpu_memory_bytes: int = 0
    cores_per_worker: float = 1.0
    compute_threads: int = 1
    sampler_threads: int = 1
    gather_threads: int = 1
    dist_sample_edges_per_s: float = 0.0
    dist_compute_flops_per_s: float = 0.0
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class BatchShape:
    """What counting needs of a sampled batch: per-hop ``num_sampled_nodes`` and
    ``num_sampled_edges``, ``batch_size``, the node ids ``n_id`` (int64) and the
    ``feature_bytes`` gathered into it (a hybrid batch: this worker's columns of every
    worker's inputs)."""

    num_sampled_nodes: list
    num_sampled_edges: list
    batch_size: int
    n_id: torch.Tensor
    feature_bytes: int = 0

    @classmethod
    def of(cls, batch) -> BatchShape:
        own = getattr(batch, "batch", batch) if hasattr(batch, "inputs") else batch
        if hasattr(batch, "inputs"):
            nbytes = int(batch.feature_bytes)
        else:
            nbytes = batch.x.numel() * batch.x.element_size()
        return cls(
            list(own.num_sampled_nodes),
            list(own.num_sampled_edges),
            int(own.batch_size),
            own.n_id.clone(),
            nbytes,
        )


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
    local_workers = int(os.environ.get("LOCAL_WORLD_SIZE", 1))
    cores = host_cores()
    # Under a cgroup's limit, the headroom below it, not the machine's free memory: a mode
    # that fits the machine would still be OOM-killed in the container.
    available = available_memory()
    if available is None:
        import psutil

        available = psutil.virtual_memory().available
    rates.host_memory_bytes = int(available // local_workers)
    rates.cores_per_worker = cores / local_workers
    rates.compute_threads = torch.get_num_threads()
    rates.sampler_threads = sampler_threads(1)
    rates.gather_threads = torch.get_num_threads()
    if device.type == "cuda":
        rates.gpu_memory_bytes = int(torch.cuda.get_device_properties(device).total_memory)


def _barrier() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.barrier()


def probe_pass(loader, step, count: int, warm: int, stages: tuple[str, ...]) -> dict:
    """Run ``step`` on every batch of one pass of ``loader`` as training does: the loader's
    stages in its threads beside the steps (so the CPU they share is inside every figure).
    The pass must hold ``warm + count + TAIL_BATCHES`` batches (its seeds cut to that), the
    first ``warm`` and the last :data:`TAIL_BATCHES` untimed, so that the figures are the
    steady state of steps beside a working loader (the steps after a loader's last batch,
    once an epoch, run beside an idle one). Returns ``shapes`` (:class:`BatchShape` of
    every batch), per timed batch ``timed`` (their shapes), ``step_s``, and for each of
    ``stages`` the seconds the loader spent in it on that batch (its own, not the stage's
    seconds between two hand-overs, which hold one batch, none or two as the loader runs
    ahead)."""
    out = {"shapes": [], "timed": [], "step_s": [], **{name: [] for name in stages}}
    _barrier()
    for i, batch in enumerate(loader):
        shape = BatchShape.of(batch)
        out["shapes"].append(shape)
        # The workers step together, as DDP's all-reduce keeps them in training: one
        # running ahead into other work would slow the other's steps on a shared machine.
        _barrier()
        started = time.perf_counter()
        step(batch)
        seconds = time.perf_counter() - started
        if warm <= i < warm + count:
            out["timed"].append(shape)
            out["step_s"].append(seconds)
    _barrier()
    per_batch = loader.batch_stage_times
    for name in stages:
        out[name] = [per_batch.get(name, {}).get(i, 0.0) for i in range(warm, warm + count)]
    expected = warm + count + TAIL_BATCHES
    if len(out["shapes"]) != expected:
        raise RuntimeError(f"the probe's pass held {len(out['shapes'])} batches, not {expected}")
    return out


def _labels(dataset, batch) -> torch.Tensor:
    y = getattr(batch, "y", None)
    if y is None:
        y = torch.as_tensor(dataset.y)[batch.n_id]
    return y[: batch.batch_size].long()


def replicated_step(model: torch.nn.Module, dataset, hops: int, reduced: list | None = None):
    """An optimizer step of a copy of ``model`` on a batch: forward, loss, backward, Adam;
    and, where ``reduced`` is given, apart from the step's arithmetic, its gradients'
    ``all_reduce`` in one buffer as data-parallel training sends it, amid its loader's
    threads: ``(ring bytes a worker sends, seconds)`` appended to ``reduced``."""
    module = SeedLogits(copy.deepcopy(model), hops)
    optimizer = torch.optim.Adam(module.parameters(), lr=1e-3)
    module.train()
    on = None if reduced is None else collective_device(dist.get_backend(), torch.device("cpu"))

    def all_reduce() -> None:
        grads = [p.grad.reshape(-1) for p in module.parameters() if p.grad is not None]
        buffer = torch.cat(grads).to(on)
        dist.barrier()
        started = time.perf_counter()
        dist.all_reduce(buffer)
        seconds = time.perf_counter() - started
        sent = ring_bytes(buffer.numel() * buffer.element_size(), dist.get_world_size())
        reduced.append((sent, seconds))

    def step(batch) -> None:
        optimizer.zero_grad()
        loss = F.cross_entropy(module(batch), _labels(dataset, batch))
        loss.backward()
        if reduced is not None:
            all_reduce()
        optimizer.step()

    return step


def hybrid_step(
    model: torch.nn.Module, dataset, columns: tuple[int, int], workers: int, exchanged: list
):
    """A hybrid optimizer step of a copy of ``model`` on a :class:`HybridBatch`: this
    worker's ``columns`` of the first layer over every worker's block, the sum of
    ``workers`` partials of its own, its later layers, backward, Adam; and, apart from the
    step's arithmetic, the partial results' forward ``all_to_all`` as hybrid training sends
    it, amid its loader's threads: ``(bytes sent, seconds)`` appended to ``exchanged``."""
    model = copy.deepcopy(model)
    seed_logits = SeedLogits(model, len(model.convs))
    first = split_first_layer(model.convs[0], *columns)
    rest = HybridRest(model, runs_whole(seed_logits))
    parameters = [*first.parameters(), *rest.parameters()]
    optimizer = torch.optim.Adam(parameters, lr=1e-3)
    first.train()
    rest.train()
    on = collective_device(str(dist.get_backend()), torch.device("cpu"))

    def exchange(partials: list[torch.Tensor], rank: int) -> None:
        sizes = [int(p.shape[0]) for p in partials]
        send = torch.cat([p.detach() for p in partials]).to(on)
        received = torch.empty((workers * sizes[rank], send.shape[1]), dtype=send.dtype, device=on)
        dist.barrier()
        started = time.perf_counter()
        dist.all_to_all_single(received, send, [sizes[rank]] * workers, sizes)
        seconds = time.perf_counter() - started
        sent = (sum(sizes) - sizes[rank]) * send.shape[1] * send.element_size()
        exchanged.append((sent, seconds))

    def step(batch: HybridBatch) -> None:
        optimizer.zero_grad()
        partials = [first(x, block) for x, block in zip(batch.inputs, batch.blocks, strict=True)]
        exchange(partials, batch.rank)
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
            # all_to_all_single splits its tensor into equal shares, one a worker.
            elements = size // 4 // workers * workers
            tensor = torch.ones(elements, dtype=torch.float32, device=on)
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
            sent.append(elements * 4 * ring)
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
