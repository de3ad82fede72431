"""The probe passes: each candidate's loaders and steps run for a few batches as training
runs them, in the joined process group, to fill :class:`~graphengine.plan.probes.Rates`
(sampling, gathering and both steps' compute) and to count the batches the volumes come
from. The probes' primitives (one pass, the link, the machine) are in
:mod:`graphengine.plan.probes`."""

from __future__ import annotations

import time

import numpy as np
import torch
import torch.distributed as dist

from graphengine.plan import probes
from graphengine.plan.candidates import CANDIDATES, GraphSize, ModelShape, volumes_of
from graphengine.plan.probes import Rates
from graphengine.plan.volumes import FLOAT_BYTES, cache_hit_rate, count_batches, layer_flops

#: Timed batches per probe (a few more are sampled and run untimed first).
PROBE_BATCHES = 5


def probe_seeds(train_idx: np.ndarray, worker_batch: int, workers: int) -> np.ndarray:
    """Seeds of exactly ``WARM + PROBE + TAIL`` batches a worker (shuffled, the same on every
    worker; repeated where the training split is smaller)."""
    batches = probes.WARM_BATCHES + PROBE_BATCHES + probes.TAIL_BATCHES
    needed = batches * worker_batch * workers
    order = np.random.default_rng(0).permutation(np.asarray(train_idx))
    return np.resize(order, needed).astype(np.int64)


def probe_dataset(model, dataset, fanouts, worker_batch, workers, rank, rates: Rates):
    """Probe the sampler, the gathers and both steps on ``dataset`` with the loaders
    training uses; returns the model's shape and the counted batches."""
    from graphengine.data.columns import FeatureColumns, column_ranges
    from graphengine.distributed.exchange import Exchange
    from graphengine.loader import NeighborLoader
    from graphengine.loader.hybrid_loader import HybridNeighborLoader

    shape = ModelShape.of(model, len(fanouts))
    seeds = probe_seeds(dataset.train_idx, worker_batch, workers)
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
    reduced: list | None = [] if workers > 1 else None
    step = probes.replicated_step(model, dataset, len(fanouts), reduced)
    data = probes.probe_pass(loader, step, PROBE_BATCHES, probes.WARM_BATCHES, ("sample", "gather"))
    _without_all_reduce(data, reduced, rates)
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


def _without_all_reduce(probed: dict, reduced: list | None, rates: Rates) -> None:
    """Take the gradients' all-reduce out of a replicated pass's step seconds, and set the
    rate it ran at (the first pass's, where a dataset and a partition were both probed)."""
    if reduced is None:
        return
    timed = reduced[probes.WARM_BATCHES : probes.WARM_BATCHES + PROBE_BATCHES]
    probed["step_s"] = [s - e for s, (_, e) in zip(probed["step_s"], timed, strict=True)]
    if not rates.gradient_bytes_per_s:
        sent, seconds = [b for b, _ in timed], [e for _, e in timed]
        rates.gradient_bytes_per_s = probes.median_rate(sent, seconds)


def _replicated_rates(probed: dict, shape: ModelShape, rates: Rates, partitioned: bool) -> None:
    """Sampling, gathering and the replicated step's rates of a pass (a part's: its
    distributed sampler, and its steps beside that sampler's threads, which take more of
    the cores they share than a local sampler's; the replicated rate too where no whole
    dataset was probed)."""
    each = [count_batches([b], shape.whole) for b in probed["timed"]]
    edges = [c.edges for c in each]
    flops = [layer_flops(c, list(shape.widths)) for c in each]
    compute = probes.median_rate(flops, probed["step_s"])
    if partitioned:
        rates.dist_sample_edges_per_s = probes.median_rate(edges, probed["sample"])
        rates.dist_compute_flops_per_s = compute
        rates.compute_flops_per_s = rates.compute_flops_per_s or compute
        return
    rates.sample_edges_per_s = probes.median_rate(edges, probed["sample"])
    rates.gather_bytes_per_s = probes.median_rate(
        [b.feature_bytes for b in probed["timed"]], probed["gather"]
    )
    rates.compute_flops_per_s = compute


def _hybrid_rate(probed: dict, shape: ModelShape, workers: int, rates: Rates) -> None:
    """The hybrid step's multiply-adds per second over a hybrid pass."""
    nothing = GraphSize(0, 0, 0)
    hybrid = CANDIDATES["hybrid"]
    flops = [
        volumes_of(hybrid, shape, count_batches([b], shape.whole), workers, 1, nothing).flops
        for b in probed["timed"]
    ]
    rates.hybrid_compute_flops_per_s = probes.median_rate(flops, probed["step_s"])


def probe_partitions(model, data, fanouts, worker_batch, rates: Rates, remote_cache) -> dict:
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
    reduced: list | None = [] if data.book.num_parts > 1 else None
    step = probes.replicated_step(model, data, len(fanouts), reduced)
    probed = probes.probe_pass(loader, step, PROBE_BATCHES, probes.WARM_BATCHES, ("sample",))
    _without_all_reduce(probed, reduced, rates)
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
