"""An epoch's metrics: what the workers moved between them, and the line the log shows."""

from __future__ import annotations

import json
import math

from graphengine.parallel.base import Strategy


def json_line(record: dict) -> str:
    """``record`` as one line of valid JSON: a float that is not finite (NaN, inf), which
    ``json.dumps`` would write as the bare ``NaN`` or ``Infinity`` no JSON parser takes,
    becomes ``null``."""
    return json.dumps(_finite(record), allow_nan=False)


def _finite(value):
    """``value`` with its non-finite floats, at any depth of dicts and lists, as ``None``."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


def check_finite_loss(loss: float, epoch: int, step: int) -> None:
    """Stop training at the first loss that is not finite: every later step would only
    spread NaN through the weights and the epoch would end with ``loss`` NaN as if it had
    trained. ``epoch`` and ``step`` count from 1.

    Raises ``ValueError`` naming the epoch, the step and the likely causes.
    """
    if not math.isfinite(loss):
        raise ValueError(
            f"the training loss is {loss} at epoch {epoch}, step {step}: check the dataset's "
            "features for NaN or inf values, or lower --lr"
        )


def traffic_metrics(strategy: Strategy, loader_stats: dict, feature_bytes: int) -> dict:
    """What this epoch moved, all workers together: ``feature_bytes`` (feature rows read
    into batches), ``gradient_bytes`` (gradients all-reduced, each worker's buckets),
    ``moved_bytes`` (sent between workers: the all-reduce counted as a ring's
    ``2 (W - 1) / W`` of its buckets, plus, for hybrid, the first layers' structures and
    partial results, forward and backward) and ``exchange_seconds_per_worker``
    (hybrid's sharing and partial-result collectives; DDP's all-reduce overlaps the
    backward pass and is not timed). ``loader_stats``: what the loader sent (hybrid's
    shared structures); every worker must call it."""
    stats = strategy.reset_stats()
    stats.update(loader_stats)
    stats["feature_bytes"] = feature_bytes
    keys = sorted(stats)
    totals = dict(zip(keys, strategy.sum([stats[k] for k in keys]), strict=True))
    totals = {k: v if k.endswith("seconds") else int(v) for k, v in totals.items()}
    workers = strategy.world_size
    ring = 2 * (workers - 1) / workers
    totals["moved_bytes"] = int(
        ring * totals.get("gradient_bytes", 0)
        + totals.get("structure_sent_bytes", 0)
        + totals.get("partial_sent_bytes", 0)
    )
    totals["exchange_seconds_per_worker"] = (
        totals.pop("structure_seconds", 0.0) + totals.pop("partial_seconds", 0.0)
    ) / workers
    return totals


def summary(metrics: dict) -> str:
    """One readable line for an epoch's ``metrics`` (see :meth:`Trainer.fit`)."""
    parts = [f"epoch {metrics['epoch']}: loss {metrics['loss']:.4f}"]
    parts.append(f"running train_acc {metrics['train_acc']:.4f}")
    if "val_acc" in metrics:
        parts.append(f"val_acc {metrics['val_acc']:.4f}")
    parts.append(f"{metrics['epoch_s']:.2f}s")
    parts.append(f"{metrics['seeds_per_s']:,.0f} seeds/s")
    if "partition" in metrics:
        crossed = metrics["partition"]
        parts.append(
            f"{crossed['remote_bytes'] / 1e6:,.1f} MB exchanged, "
            f"{100 * crossed['cut_edge_share']:.1f}% of sampled edges cut"
        )
        if "cache_hit_rate" in crossed:  # hybrid workers fetch no remote rows to cache
            parts.append(f"cache hit rate {100 * crossed['cache_hit_rate']:.1f}%")
    stages = " ".join(f"{name} {seconds:.2f}s" for name, seconds in metrics["stage_s"].items())
    return ", ".join(parts) + f" (stages: {stages})"
