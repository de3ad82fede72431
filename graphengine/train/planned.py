"""``parallel='auto'``: the planner (:mod:`graphengine.plan`) chooses how the workers split
training before the Trainer builds anything, so the loop runs the chosen strategy as if it
had been asked for by name."""

from __future__ import annotations

import logging

import torch.distributed as dist

from graphengine.distributed.data import DistData
from graphengine.train.config import TrainConfig, split_batch

log = logging.getLogger(__name__)


def resolve_parallel(model, dataset, config: TrainConfig) -> tuple[TrainConfig, dict]:
    """``config`` with ``parallel='auto'`` replaced by the planner's choice for ``model`` on
    ``dataset`` (a GraphDataset on every worker, or this worker's part of a partition), and
    what every epoch's metrics then carry: ``{"plan": {"choice", "predicted_epoch_s",
    "compute_s", "sampling_s", "gather_s", "exchange_s"}}``. Any other ``parallel``:
    ``config`` itself and no metrics. Every worker calls it (the probes are collectives)."""
    if config.parallel != "auto":
        return config, {}
    from graphengine.plan import make_plan

    grouped = dist.is_available() and dist.is_initialized()
    workers = dist.get_world_size() if grouped else 1
    batch_size, _ = split_batch(config.batch_size, config.worker_batch_size, workers)
    partitioned = isinstance(dataset, DistData)
    plan = make_plan(
        model,
        config.fanouts,
        batch_size,
        dataset=None if partitioned else dataset,
        partitions=dataset if partitioned else None,
        device=config.device,
        remote_cache=config.remote_cache,
        hybrid=config.eval_mode in ("auto", "sampled"),
    )
    if not grouped or dist.get_rank() == 0:
        log.info(
            "--plan auto: training with %s (predicted epoch %.1f s: %s)",
            plan.chosen.command,
            plan.prediction_of(plan.choice).epoch_s,
            plan.reason,
        )
    return config.replace(parallel=plan.chosen.parallel), {"plan": plan.metrics()}
