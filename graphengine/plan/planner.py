"""The candidates, their volumes, and the choice.

Candidates, and how each is run:

- ``data``: ``graphengine train --parallel data`` (every worker the whole dataset);
- ``hybrid``: ``--parallel hybrid`` (every worker the graph, ``F/W`` of the feature columns);
- ``partitioned``: ``--parallel data --partitions DIR`` (each worker a part, remote feature
  rows fetched, a cache of them with ``--remote-cache``);
- ``hybrid-partitioned``: ``--parallel hybrid --partitions DIR`` (each worker a part of the
  structure and ``F/W`` of every node's columns, exchanged once before training).

With a dataset on every worker the first two are candidates, with a partition the last
two, with both all four. A candidate whose memory per worker exceeds the limit is excluded.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.distributed as dist
from torch_geometric.nn.models.basic_gnn import BasicGNN

from graphengine.plan import probes
from graphengine.plan.cost_model import Link, Prediction, predict
from graphengine.plan.probes import BatchShape, Rates
from graphengine.plan.volumes import (
    FLOAT_BYTES,
    BatchCounts,
    Memory,
    Volumes,
    cache_hit_rate,
    count_batches,
    ddp_buckets,
    layer_flops,
    steps_per_epoch,
)
from graphengine.runtime import host_memory_cache

log = logging.getLogger(__name__)

#: Timed batches per probe (a few more are sampled and run untimed first).
PROBE_BATCHES = 5


@dataclass(frozen=True)
class Candidate:
    """A way to train: its ``train`` options."""

    name: str
    parallel: str
    partitioned: bool

    @property
    def hybrid(self) -> bool:
        return self.parallel == "hybrid"

    @property
    def command(self) -> str:
        partitions = " --partitions DIR" if self.partitioned else ""
        return f"graphengine train --parallel {self.parallel}{partitions}"


CANDIDATES = {
    c.name: c
    for c in (
        Candidate("data", "data", False),
        Candidate("hybrid", "hybrid", False),
        Candidate("partitioned", "data", True),
        Candidate("hybrid-partitioned", "hybrid", True),
    )
}


def candidates_for(has_dataset: bool, has_partitions: bool, workers: int) -> list[Candidate]:
    """The candidates of a run with a dataset on every worker and/or a partition; hybrid
    ones need 2 or more workers."""
    names = []
    if has_dataset:
        names += ["data", "hybrid"]
    if has_partitions:
        names += ["partitioned", "hybrid-partitioned"]
    if not names:
        raise ValueError("a plan needs a dataset on every worker or a partition (got neither)")
    return [CANDIDATES[n] for n in names if workers > 1 or not CANDIDATES[n].hybrid]


@dataclass(frozen=True)
class ModelShape:
    """What the volumes need of the model: ``widths`` (input, hidden..., classes),
    ``parameter_bytes`` per parameter in the model's order, ``replicated_bytes`` those hybrid
    keeps replicated (all but the first layer's weights on the input columns), ``whole``
    (its first layer computes every node)."""

    widths: tuple[int, ...]
    parameter_bytes: tuple[int, ...]
    replicated_bytes: tuple[int, ...]
    whole: bool

    @classmethod
    def of(cls, model: torch.nn.Module, hops: int) -> ModelShape:
        from graphengine.nn.forward import SeedLogits
        from graphengine.parallel.hybrid import runs_whole

        seed_logits = SeedLogits(model, hops)
        in_width = int(model.in_channels)
        first = {id(p) for p in model.convs[0].parameters()}
        parameters = [p for p in model.parameters() if p.requires_grad]
        sizes = tuple(p.numel() * p.element_size() for p in parameters)
        # The first layer's weights on the input columns are what hybrid splits.
        replicated = tuple(
            p.numel() * p.element_size()
            for p in parameters
            if not (id(p) in first and p.dim() == 2 and p.shape[1] == in_width)
        )
        widths = (in_width, *[int(c.out_channels) for c in model.convs])
        return cls(widths, sizes, replicated, runs_whole(seed_logits))


@dataclass(frozen=True)
class GraphSize:
    """What a worker holds of the graph: ``nodes`` and ``edges`` of the whole graph, its
    part's ``part_nodes`` and ``part_edges``, ``index_bytes`` per edge index, ``features``."""

    nodes: int
    edges: int
    features: int
    index_bytes: int = 4
    part_nodes: int = 0
    part_edges: int = 0


def volumes_of(
    candidate: Candidate,
    shape: ModelShape,
    counts: BatchCounts,
    workers: int,
    steps: int,
    graph: GraphSize,
    cache: dict | None = None,
    on_gpu: bool = False,
) -> Volumes:
    """:class:`Volumes` of ``candidate`` from one worker's ``counts`` at ``workers``.

    ``cache`` (partitioned): ``rows`` cached and ``hit_rate`` of remote rows.
    """
    width = shape.widths[0]
    share = 1.0 / workers if candidate.hybrid else 1.0
    flops = layer_flops(counts, list(shape.widths), share)
    if candidate.hybrid:  # this worker's columns of every worker's first layer
        first = layer_flops(
            BatchCounts(counts.seeds, counts.n_src, counts.n_dst, counts.edges, counts.hops[:1], 0),
            list(shape.widths[:2]),
            share,
        )
        flops += (workers - 1) * first
        gathered_rows = workers * counts.n_src
        gathered_bytes = gathered_rows * math.ceil(width / workers) * FLOAT_BYTES
        replicated = list(shape.replicated_bytes)
    else:
        gathered_rows = counts.n_src
        gathered_bytes = counts.n_src * width * FLOAT_BYTES
        replicated = list(shape.parameter_bytes)
    buckets = ddp_buckets(replicated)
    volumes = Volumes(
        name=candidate.name,
        workers=workers,
        steps=steps,
        counts=counts,
        flops=flops,
        gathered_rows=gathered_rows,
        gathered_bytes=gathered_bytes,
        gradient_bytes=float(sum(replicated)),
        gradient_buckets=buckets,
        memory=_memory(candidate, shape, counts, workers, graph, cache, on_gpu),
    )
    if candidate.hybrid:
        volumes.structure_bytes = (workers - 1) * counts.structure_bytes
        hidden = shape.widths[1]
        volumes.partial_bytes = 2 * (workers - 1) * counts.n_dst * hidden * FLOAT_BYTES
        if candidate.partitioned:  # the other parts' rows of this worker's columns, once
            volumes.setup_bytes = graph.part_nodes * width * (workers - 1) / workers * FLOAT_BYTES
    elif candidate.partitioned:
        hit = (cache or {}).get("hit_rate", 0.0)
        volumes.remote_rows = counts.remote_rows
        volumes.cache_hit_rate = hit
        # Ids asked (int64), rows and labels (int64) back.
        volumes.fetched_bytes = counts.remote_rows * (1 - hit) * (width * FLOAT_BYTES + 16)
    return volumes


def _memory(
    candidate: Candidate,
    shape: ModelShape,
    counts: BatchCounts,
    workers: int,
    graph: GraphSize,
    cache: dict | None,
    on_gpu: bool,
) -> Memory:
    """Bytes a worker of ``candidate`` holds (labels int64 with the structure)."""
    width = shape.widths[0]
    columns = math.ceil(width / workers) if candidate.hybrid else width
    if candidate.partitioned:
        structure = 8 * (graph.part_nodes + 1) + (graph.index_bytes + 8) * graph.part_edges
        labels = 8 * graph.part_nodes
        rows = graph.nodes if candidate.hybrid else graph.part_nodes
    else:
        structure = 8 * (graph.nodes + 1) + graph.index_bytes * graph.edges
        labels = 8 * graph.nodes
        rows = graph.nodes
    memory = Memory(features=rows * columns * FLOAT_BYTES, graph=structure + labels)
    if candidate.partitioned and not candidate.hybrid and cache:
        memory.cache = int(cache.get("rows", 0) * (width * FLOAT_BYTES + 8))
    if on_gpu:
        parameters = sum(shape.parameter_bytes)
        batch = counts.n_src * columns * FLOAT_BYTES * (workers if candidate.hybrid else 1)
        activations = sum(n * w for (n, _), w in zip(counts.hops, shape.widths[1:], strict=True))
        # Weights, gradients and Adam's two moments; two batches in flight; activations and
        # their gradients.
        memory.device = int(4 * parameters + 2 * batch + 2 * FLOAT_BYTES * activations)
    return memory


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


def choose(
    volumes: dict[str, Volumes],
    predictions: dict[str, Prediction],
    host_memory: float | None,
    gpu_memory: float | None = None,
) -> tuple[str, str, list[dict]]:
    """The fastest candidate whose memory per worker fits ``host_memory`` (and
    ``gpu_memory``; ``None``: no limit): ``(name, reason, rows)``.

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
    best = fitting[0]
    bottleneck = max(("compute", "sampling", "gather", "exchange"), key=lambda k: best[f"{k}_s"])
    others = [r["name"] for r in rows if not r["fits"]]
    if len(rows) == 1:
        reason = f"the only candidate for {len(rows)} worker(s) with this data"
    elif len(fitting) == 1:
        reason = f"the only candidate that fits in memory ({', '.join(others)} do not)"
    else:
        runner = fitting[1]
        reason = (
            f"fastest predicted epoch, {best['epoch_s']:.1f} s against {runner['name']}'s "
            f"{runner['epoch_s']:.1f} s ({runner['epoch_s'] / best['epoch_s']:.2f}x); its "
            f"largest part is {bottleneck}"
        )
    return best["name"], reason, rows


def _probe_seeds(train_idx: np.ndarray, worker_batch: int, workers: int) -> np.ndarray:
    """Seeds of exactly ``WARM + PROBE + TAIL`` batches a worker (shuffled, the same on every
    worker; repeated where the training split is smaller)."""
    batches = probes.WARM_BATCHES + PROBE_BATCHES + probes.TAIL_BATCHES
    needed = batches * worker_batch * workers
    order = np.random.default_rng(0).permutation(np.asarray(train_idx))
    return np.resize(order, needed).astype(np.int64)


def _probe_dataset(model, dataset, fanouts, worker_batch, workers, rank, rates: Rates):
    """Probe the sampler, the gathers and both steps on ``dataset`` with the loaders
    training uses; returns the model's shape and the counted batches."""
    from graphengine.data.columns import FeatureColumns, column_ranges
    from graphengine.distributed.exchange import Exchange
    from graphengine.loader import NeighborLoader
    from graphengine.loader.hybrid_loader import HybridNeighborLoader

    shape = ModelShape.of(model, len(fanouts))
    seeds = _probe_seeds(dataset.train_idx, worker_batch, workers)
    loader = NeighborLoader(
        dataset,
        fanouts,
        batch_size=worker_batch,
        input_nodes=seeds,
        seed=0,
        num_workers=1,
        rank=rank,
        world_size=workers,
    )
    step = probes.replicated_step(model, dataset, len(fanouts))
    data = probes.probe_pass(loader, step, PROBE_BATCHES, probes.WARM_BATCHES, ("sample", "gather"))
    _replicated_rates(data, shape, rates, partitioned=False)
    if workers > 1:
        start, stop = column_ranges(dataset.num_features, workers)[rank]
        columns = FeatureColumns.from_table(dataset.x, start, stop)
        exchange = Exchange(dist.new_group(backend="gloo"), torch.device("cpu"))
        loader = HybridNeighborLoader(
            dataset,
            fanouts,
            columns,
            exchange,
            batch_size=worker_batch,
            input_nodes=seeds,
            whole=shape.whole,
            num_workers=1,
        )
        exchanged: list = []
        step = probes.hybrid_step(model, dataset, (start, stop), workers, exchanged)
        hybrid = probes.probe_pass(loader, step, PROBE_BATCHES, probes.WARM_BATCHES, ("gather",))
        timed = exchanged[probes.WARM_BATCHES : probes.WARM_BATCHES + PROBE_BATCHES]
        # The step's arithmetic without the exchange it waited for.
        hybrid["step_s"] = [s - e for s, (_, e) in zip(hybrid["step_s"], timed, strict=True)]
        rates.partial_bytes_per_s = probes.median_rate([b for b, _ in timed], [e for _, e in timed])
        rates.column_gather_bytes_per_s = probes.median_rate(
            [b.feature_bytes for b in hybrid["timed"]], hybrid["gather"]
        )
        _hybrid_rate(hybrid, shape, workers, rates)
    return shape, count_batches(data["shapes"], shape.whole)


def _replicated_rates(probed: dict, shape: ModelShape, rates: Rates, partitioned: bool) -> None:
    """Sampling, gathering and the replicated step's rates of a pass (a part's: its
    distributed sampler, and its compute only where no whole dataset was probed)."""
    each = [count_batches([b], shape.whole) for b in probed["timed"]]
    edges = [c.edges for c in each]
    if partitioned:
        rates.dist_sample_edges_per_s = probes.median_rate(edges, probed["sample"])
        if rates.compute_flops_per_s:
            return
    else:
        rates.sample_edges_per_s = probes.median_rate(edges, probed["sample"])
        rates.gather_bytes_per_s = probes.median_rate(
            [b.feature_bytes for b in probed["timed"]], probed["gather"]
        )
    flops = [layer_flops(c, list(shape.widths)) for c in each]
    rates.compute_flops_per_s = probes.median_rate(flops, probed["step_s"])


def _hybrid_rate(probed: dict, shape: ModelShape, workers: int, rates: Rates) -> None:
    """The hybrid step's multiply-adds per second over a hybrid pass."""
    nothing = GraphSize(0, 0, 0)
    hybrid = CANDIDATES["hybrid"]
    flops = [
        volumes_of(hybrid, shape, count_batches([b], shape.whole), workers, 1, nothing).flops
        for b in probed["timed"]
    ]
    rates.hybrid_compute_flops_per_s = probes.median_rate(flops, probed["step_s"])


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
            shape, counts = _probe_dataset(
                model, dataset, fanouts, worker_batch, workers, rank, rates
            )
        if partitions is not None:
            part = _probe_partitions(model, partitions, fanouts, worker_batch, rates, remote_cache)
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


def _probe_partitions(model, data, fanouts, worker_batch, rates: Rates, remote_cache) -> dict:
    """Probe the distributed sampler and fetch on this worker's part (and the replicated
    step, when no whole dataset was probed), and count its batches."""
    from graphengine.distributed.features import cache_rows
    from graphengine.loader.dist_neighbor_loader import DistNeighborLoader

    shape = ModelShape.of(model, len(fanouts))
    part, book = data.part, data.book

    def remote(ids: np.ndarray) -> np.ndarray:
        return book.owner(ids) != part.part

    needed = (probes.WARM_BATCHES + PROBE_BATCHES + probes.TAIL_BATCHES) * worker_batch
    seeds = np.resize(np.random.default_rng(0).permutation(part.train_idx), needed)
    loader = DistNeighborLoader(
        data, fanouts, batch_size=worker_batch, input_nodes=seeds, seed=0, num_workers=1
    )
    step = probes.replicated_step(model, data, len(fanouts))
    probed = probes.probe_pass(loader, step, PROBE_BATCHES, probes.WARM_BATCHES, ("sample",))
    loader.reset_stats()
    if not rates.gather_bytes_per_s:  # no whole dataset here: time the part's own rows
        ids = torch.cat([b.n_id for b in probed["timed"]])
        local = ids[torch.from_numpy(~remote(ids.numpy()))] - part.start
        started = time.perf_counter()
        rows = data.features.store.gather("x", local)
        seconds = time.perf_counter() - started
        rates.gather_bytes_per_s = rows.numel() * rows.element_size() / max(seconds, 1e-9)
        rates.column_gather_bytes_per_s = rates.gather_bytes_per_s
    _replicated_rates(probed, shape, rates, partitioned=True)
    if not rates.hybrid_compute_flops_per_s:  # no hybrid pass without the whole table
        rates.hybrid_compute_flops_per_s = rates.compute_flops_per_s
    training = DistNeighborLoader(data, fanouts, batch_size=worker_batch, num_workers=0)
    cache = None
    if remote_cache is not None:
        width = data.num_features
        capacity = cache_rows(remote_cache, width * FLOAT_BYTES + 8, data.features.num_remote_nodes)
        counter = training.access_counts(1, 0)
        counter.ranked()
        cache = {"rows": capacity, "hit_rate": cache_hit_rate(counter.counts, capacity)}
    graph = GraphSize(
        book.num_nodes,
        0,
        data.num_features,
        part.indices.dtype.itemsize,
        part.num_nodes,
        part.num_edges,
    )
    return {
        "shape": shape,
        "counts": count_batches(probed["shapes"], shape.whole, remote),
        "steps": len(training),
        "graph": graph,
        "cache": cache,
    }


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
