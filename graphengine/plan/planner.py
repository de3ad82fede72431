"""The plan: probe (:mod:`.probe_runs`), count each candidate's volumes
(:mod:`.candidates`), predict its epoch (:mod:`.cost_model`), and choose the fastest
candidate whose memory per worker fits (a near tie going to the simpler mode); and the
projection of data and hybrid to other worker counts.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.distributed as dist
from torch_geometric.nn.models.basic_gnn import BasicGNN

from graphengine.plan import probes
from graphengine.plan.candidates import (
    CANDIDATES,
    Candidate,
    GraphSize,
    ModelShape,
    candidates_for,
    volumes_of,
)
from graphengine.plan.cost_model import Link, Prediction, predict
from graphengine.plan.probe_runs import PROBE_BATCHES, probe_dataset, probe_partitions
from graphengine.plan.probes import BatchShape, Rates
from graphengine.plan.volumes import Volumes, count_batches, steps_per_epoch
from graphengine.runtime import host_memory_cache

log = logging.getLogger(__name__)


@dataclass
class Plan:
    """The choice and every candidate's prediction.

    ``rows``: per candidate ``name``, ``parallel``, ``partitioned``, ``epoch_s``,
    ``step_s``, ``steps``, ``compute_s``, ``sampling_s``, ``gather_s``, ``exchange_s``,
    ``memory_bytes``, ``fits``, ``why_not`` (``None`` when it fits).
    """

    choice: str
    reason: str
    workers: int
    rows: list[dict]
    rates: Rates
    volumes: dict[str, Volumes]
    predictions: dict[str, Prediction]
    projections: list[dict] = field(default_factory=list)

    @property
    def chosen(self) -> Candidate:
        return CANDIDATES[self.choice]

    def prediction_of(self, name: str) -> Prediction:
        return self.predictions[name]

    def as_json(self) -> dict:
        """The JSON line ``graphengine plan`` prints."""
        out = {
            "choice": self.choice,
            "reason": self.reason,
            "workers": self.workers,
            "candidates": self.rows,
            "rates": self.rates.as_dict(),
            "volumes": {name: v.as_dict() for name, v in self.volumes.items()},
        }
        if self.projections:
            out["projections"] = self.projections
        return out

    def metrics(self) -> dict:
        """What each epoch's metrics carry: the choice, its predicted epoch and its parts."""
        p = self.predictions[self.choice]
        return {
            "choice": self.choice,
            "predicted_epoch_s": p.epoch_s,
            "compute_s": p.compute_s,
            "sampling_s": p.sampling_s,
            "gather_s": p.gather_s,
            "exchange_s": p.exchange_s,
        }


#: Candidates predicted within this share of the fastest tie, and a tie goes to the first of
#: them in :data:`~graphengine.plan.candidates.CANDIDATES`' order (data parallelism first):
#: predictions this close differ by less than the probes' own error (docs/benchmarks-archive.md,
#: issue 32), and were they right, the tie's choice would cost at most this share of an epoch.
TIE_MARGIN = 0.05


def choose(
    volumes: dict[str, Volumes],
    predictions: dict[str, Prediction],
    host_memory: float | None,
    gpu_memory: float | None = None,
) -> tuple[str, str, list[dict]]:
    """The fastest candidate whose memory per worker fits ``host_memory`` (and
    ``gpu_memory``; ``None``: no limit), ties within :data:`TIE_MARGIN` going to the first in
    ``CANDIDATES``' order: ``(name, reason, rows)``.

    Raises:
        ValueError: no candidate fits.
    """
    rows = []
    for name, p in predictions.items():
        v, candidate = volumes[name], CANDIDATES[name]
        why_not = None
        if host_memory is not None and v.memory.host > host_memory:
            why_not = (
                f"needs {v.memory.host / 1e9:.2f} GB of host memory per worker, over the "
                f"{host_memory / 1e9:.2f} GB limit"
            )
        elif gpu_memory is not None and v.memory.device > gpu_memory:
            why_not = (
                f"needs {v.memory.device / 1e9:.2f} GB of GPU memory per worker, over the "
                f"{gpu_memory / 1e9:.2f} GB limit"
            )
        rows.append(
            {
                "name": name,
                "parallel": candidate.parallel,
                "partitioned": candidate.partitioned,
                "epoch_s": p.epoch_s,
                "step_s": p.step_s,
                "steps": p.steps,
                "compute_s": p.compute_s,
                "sampling_s": p.sampling_s,
                "gather_s": p.gather_s,
                "exchange_s": p.exchange_s,
                "memory_bytes": v.memory.host,
                "fits": why_not is None,
                "why_not": why_not,
            }
        )
    fitting = sorted((r for r in rows if r["fits"]), key=lambda r: r["epoch_s"])
    if not fitting:
        limits = "; ".join(f"{r['name']}: {r['why_not']}" for r in rows)
        raise ValueError(f"no candidate fits the memory limit ({limits})")
    fastest = fitting[0]
    order = list(CANDIDATES)
    tied = [r for r in fitting if r["epoch_s"] <= fastest["epoch_s"] * (1 + TIE_MARGIN)]
    best = min(tied, key=lambda r: order.index(r["name"]))
    bottleneck = max(("compute", "sampling", "gather", "exchange"), key=lambda k: best[f"{k}_s"])
    others = [r["name"] for r in rows if not r["fits"]]
    if len(rows) == 1:
        reason = f"the only candidate for {len(rows)} worker(s) with this data"
    elif len(fitting) == 1:
        reason = f"the only candidate that fits in memory ({', '.join(others)} do not)"
    elif best is not fastest:
        reason = (
            f"predicted {best['epoch_s']:.2f} s an epoch, within {TIE_MARGIN:.0%} of "
            f"{fastest['name']}'s {fastest['epoch_s']:.2f} s: a tie, which goes to the "
            f"simpler mode (in the order {', '.join(order)})"
        )
    else:
        runner = fitting[1]
        reason = (
            f"fastest predicted epoch, {best['epoch_s']:.3g} s against {runner['name']}'s "
            f"{runner['epoch_s']:.3g} s ({runner['epoch_s'] / best['epoch_s']:.2f}x); its "
            f"largest part is {bottleneck}"
        )
    return best["name"], reason, rows


def make_plan(
    model: torch.nn.Module,
    fanouts,
    batch_size: int,
    dataset=None,
    partitions=None,
    device: torch.device | str = "cpu",
    host_memory: float | None = None,
    gpu_memory: float | None = None,
    remote_cache: int | str | None = None,
    project_hosts: list[int] | None = None,
    link_gbps: float | None = None,
    hybrid: bool = True,
) -> Plan:
    """Probe, count and predict every candidate in the joined process group (or alone),
    and choose. Every worker calls it with the same arguments and gets the same plan.

    Args:
        model: the model to train (not changed: the probes train copies of it).
        fanouts: neighbors per hop.
        batch_size: seeds per step, all workers together (each takes ``batch_size / W``).
        dataset: the whole :class:`~graphengine.datasets.GraphDataset` on this worker, or
            ``None``.
        partitions: this worker's :class:`~graphengine.distributed.DistData`, or ``None``.
        device: where training runs.
        host_memory, gpu_memory: bytes per worker a candidate may hold; ``host_memory``
            defaults to the host memory available per worker.
        remote_cache: the partitioned candidate's cache of remote rows (as ``train``'s
            ``--remote-cache``).
        project_hosts: worker counts to project the candidates to (one worker a host).
        link_gbps: the projection's link, gigabits per second (default: the probed one).
        hybrid: whether the hybrid candidates may be chosen (they evaluate sampled batches).

    Raises:
        ValueError: ``model`` is not a PyG ``BasicGNN`` with one layer per hop, the batch
            does not split evenly over the workers, or no candidate fits in memory.
    """
    started = time.perf_counter()
    device = torch.device(device)
    grouped = dist.is_available() and dist.is_initialized()
    workers = dist.get_world_size() if grouped else 1
    rank = dist.get_rank() if grouped else 0
    if batch_size % workers:
        raise ValueError(
            f"'batch_size' {batch_size} (the global batch) must be a multiple of the {workers} "
            "workers"
        )
    worker_batch = batch_size // workers
    fanouts = list(fanouts)
    rates = Rates()
    probes.machine(rates, device)
    if workers > 1:
        for key, value in probes.probe_link(device).items():
            setattr(rates, key, value)
    if not isinstance(model, BasicGNN) or model.num_layers != len(fanouts):
        raise ValueError(
            "a plan times the layers of a PyG BasicGNN with one layer per fanout (got "
            f"{type(model).__name__} for {len(fanouts)} fanouts)"
        )
    candidates = candidates_for(dataset is not None, partitions is not None, workers)
    if not hybrid:
        candidates = [c for c in candidates if not c.hybrid]
    # The probes' steps reuse host memory as training's do (Trainer.fit's span).
    with torch.random.fork_rng(devices=[]), host_memory_cache():
        shape, counts, part = None, None, None
        if dataset is not None:
            shape, counts = probe_dataset(
                model, dataset, fanouts, worker_batch, workers, rank, rates
            )
        if partitions is not None:
            part = probe_partitions(model, partitions, fanouts, worker_batch, rates, remote_cache)
            shape = shape or part["shape"]
    rates.seconds = time.perf_counter() - started
    rates = probes.agree(rates)
    on_gpu = device.type == "cuda"
    volumes, predictions = {}, {}
    for candidate in candidates:
        if candidate.partitioned:
            v = volumes_of(
                candidate,
                shape,
                part["counts"],
                workers,
                part["steps"],
                part["graph"],
                part["cache"],
                on_gpu,
            )
        else:
            graph = GraphSize(
                dataset.num_nodes,
                int(dataset.graph.indices.shape[0]),
                dataset.num_features,
                dataset.graph.indices.dtype.itemsize,
            )
            steps = steps_per_epoch(len(dataset.train_idx), worker_batch, workers)
            v = volumes_of(candidate, shape, counts, workers, steps, graph, None, on_gpu)
        volumes[candidate.name] = v
        link = Link.probed(rates, workers)
        predictions[candidate.name] = predict(
            v, rates, link, candidate.hybrid, candidate.partitioned
        )
    limit = host_memory if host_memory is not None else rates.host_memory_bytes
    choice, reason, rows = choose(volumes, predictions, limit, gpu_memory)
    plan = Plan(choice, reason, workers, rows, rates, volumes, predictions)
    if project_hosts and dataset is not None:
        plan.projections = project(
            shape, dataset, fanouts, batch_size, rates, project_hosts, link_gbps, workers
        )
    if rank == 0:
        log.info("plan: %s (%s)", choice, reason)
    return plan


def project(
    shape: ModelShape,
    dataset,
    fanouts,
    batch_size: int,
    rates: Rates,
    hosts: list[int],
    link_gbps: float | None,
    probed_workers: int,
) -> list[dict]:
    """Data and hybrid at each of ``hosts`` workers (one a host, each like this run's
    workers): batches of ``batch_size / W`` seeds re-sampled and counted here, the probed
    rates, the link probed or at ``link_gbps``. Partitioned candidates are not projected:
    their remote rows depend on a partition into that many parts."""
    from samplers import NeighborSampler, SamplerInput

    graph = dataset.graph
    sampler = NeighborSampler(graph.indptr, graph.indices, list(fanouts))
    rng = np.random.default_rng(1)
    out = []
    size = GraphSize(
        dataset.num_nodes,
        int(graph.indices.shape[0]),
        dataset.num_features,
        graph.indices.dtype.itemsize,
    )
    base = Link.probed(rates, max(probed_workers, 2), link_gbps)
    for workers in hosts:
        if batch_size % workers:
            raise ValueError(f"'batch_size' {batch_size} must be a multiple of {workers} hosts")
        seeds = batch_size // workers
        batches = []
        for b in range(PROBE_BATCHES):
            nodes = rng.choice(dataset.train_idx, seeds, replace=False)
            sample = sampler.sample_from_nodes(
                SamplerInput(node=nodes, input_id=np.arange(seeds), seed=b)
            )
            batches.append(
                BatchShape(
                    list(sample.num_sampled_nodes),
                    list(sample.num_sampled_edges),
                    seeds,
                    torch.from_numpy(np.asarray(sample.node)),
                )
            )
        counts = count_batches(batches, shape.whole)
        steps = steps_per_epoch(len(dataset.train_idx), seeds, workers)
        link = base.at(workers)
        row = {"workers": workers}
        for name in ("data", "hybrid"):
            candidate = CANDIDATES[name]
            v = volumes_of(candidate, shape, counts, workers, steps, size)
            p = predict(v, rates, link, candidate.hybrid, False)
            row[name] = {"epoch_s": p.epoch_s, "step_s": p.step_s, "exchange_s": p.exchange_s}
        row["choice"] = min(("data", "hybrid"), key=lambda n: row[n]["epoch_s"])
        out.append(row)
    return out
