"""When a training run evaluates: the epoch schedule shared by node and link training."""

from __future__ import annotations


def check_schedule(epochs: int, eval_every: int) -> None:
    """Raise ``ValueError`` unless ``epochs`` and ``eval_every`` (0: never) are >= 0."""
    if epochs < 0:
        raise ValueError(f"'epochs' must be >= 0 (got {epochs})")
    if eval_every < 0:
        raise ValueError(f"'eval_every' must be >= 0, 0 for never (got {eval_every})")


def evaluation_due(epoch: int, epochs: int, eval_every: int) -> bool:
    """Whether to evaluate after ``epoch`` (1-based) of ``epochs``: every ``eval_every``
    epochs and after the last, never with ``eval_every=0``."""
    return eval_every > 0 and (epoch % eval_every == 0 or epoch == epochs)
