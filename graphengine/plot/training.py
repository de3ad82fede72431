"""The figure of ``graphengine bench train --plot``: seconds per training step per library,
graphengine's split into the phases the bench measures."""

from __future__ import annotations

import statistics
from pathlib import Path

from graphengine.plot.figure import new_figure, save_figure, threads
from graphengine.plot.sampling import top_down

# ``bench train``'s libraries (keys of its ``step_s_by_library``) -> bar labels.
LIBRARIES = {
    "graphengine": "graphengine (as its CLI runs)",
    "graphengine_user": "graphengine (library user)",
    "graphengine_uncached": "graphengine (user, host cache off)",
    "pyg": "PyG NeighborLoader loop",
    "dgl": "DGL DataLoader loop",
}
# The parts of graphengine's step on the training thread, in stacking order; they sum to
# the step. The loader's sample and gather threads run beside them (the second panel).
STEP_PARTS = {
    "compute": "model step (forward, backward, optimizer)",
    "waiting": "waiting for the loader",
    "other": "rest of the step",
}


def plot_step(summary: dict, path: str | Path) -> Path:
    """Draw ``bench train``'s seconds per step to ``path`` (:func:`step_figure`'s figure).

    Args:
        summary: ``bench train``'s JSON line (see :func:`step_figure`).
        path: the figure's file; its suffix gives the format.

    Returns:
        the path written.
    """
    return save_figure(step_figure(summary), path)


def step_figure(summary: dict):
    """The figure of ``bench train``'s seconds per step, one bar per library (a matplotlib
    ``Figure``, not saved).

    Args:
        summary: ``bench train``'s JSON line: ``step_s_by_library`` (library -> dict with
            ``median`` and ``rounds``, seconds a step: the median and each round's),
            ``step_s`` (graphengine's median), ``stage_s`` (graphengine's pipeline stages ->
            seconds over the ``batches`` timed steps, the mean over the rounds: ``sample``,
            ``gather``, ``waiting``, ``compute``, more on a GPU), ``batches``, and
            ``dataset``, ``model``, ``batch_size``, ``threads``, ``device`` for the title.

    The left panel draws each library's median step. graphengine's is split into
    :data:`STEP_PARTS` (the model's compute, the wait for the next batch and the rest) in the
    shares they take of its mean step over the rounds (the stage times are means; with one
    round, mean and median are the same step), scaled to its median step; the peers' steps
    are not split (their benches time the whole step). The right panel shows graphengine's
    stages a step (the mean over the rounds): the loader's threads sample and gather the
    next batches while the model computes, so these overlap and their sum exceeds the step
    (its median drawn as a line).
    """
    figure, (steps, stages) = new_figure(2, width=6.0, height=4.4)
    per_step = {k: v / summary["batches"] for k, v in summary["stage_s"].items()}
    # graphengine's row always runs: first, stacked; then the others as the bench ran them.
    libraries = [k for k in LIBRARIES if k in summary["step_s_by_library"]]
    step_s = summary["step_s"]
    rounds = summary["step_s_by_library"]["graphengine"]["rounds"]
    parts = _step_parts(per_step, statistics.mean(rounds), step_s)
    left = 0.0
    for i, (key, label) in enumerate(STEP_PARTS.items()):
        steps.barh([0], [parts[key]], left=left, label=label, color=f"C{i}")
        left += parts[key]
    medians = [summary["step_s_by_library"][k]["median"] for k in libraries[1:]]
    if medians:
        bars = steps.barh(
            range(1, len(libraries)), medians, color="0.6", label="whole step (not split)"
        )
        steps.bar_label(bars, labels=[f"{m:.3g} s" for m in medians], padding=3, fontsize="small")
    steps.text(step_s, 0, f" {step_s:.3g} s", va="center", fontsize="small")
    steps.set_yticks(range(len(libraries)), [LIBRARIES[k] for k in libraries])
    top_down(steps, len(libraries))
    # the stacked parts' left edges stick the axis to them: room for the labels set outright
    steps.set_xlim(0, 1.2 * max([left, *medians]))
    over = f"median of {len(rounds)} rounds" if len(rounds) > 1 else "one round"
    steps.set_xlabel(f"seconds per training step ({over}; lower is better)")
    steps.legend(fontsize="x-small", loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=2)
    steps.grid(True, axis="x", alpha=0.3)

    names = [k for k in per_step if k != "waiting"]
    bars = stages.barh(range(len(names)), [per_step[k] for k in names], color="C0")
    stages.bar_label(
        bars, labels=[f"{per_step[k]:.3g} s" for k in names], padding=3, fontsize="small"
    )
    stages.axvline(step_s, color="k", linestyle="--", label=f"step: {step_s:.3g} s")
    stages.set_yticks(range(len(names)), names)
    top_down(stages, len(names))
    stages.margins(x=0.2)
    mean = f"mean of {len(rounds)} rounds; " if len(rounds) > 1 else ""
    stages.set_xlabel(f"seconds per step, each stage ({mean}they overlap)")
    stages.set_title("graphengine's pipeline stages", fontsize="medium")
    stages.legend(fontsize="x-small", loc="best")
    stages.grid(True, axis="x", alpha=0.3)
    figure.suptitle(
        f"Training step, {summary['model']} on {summary['dataset']}: batches of "
        f"{summary['batch_size']}, {threads(summary['threads'])}, {summary['device']}",
        fontsize="medium",
    )
    return figure


def _step_parts(per_step: dict, mean_step: float, step_s: float) -> dict:
    """:data:`STEP_PARTS`' seconds: each part's share of the mean step (the stage times are
    means over the rounds) times the median step ``step_s``, so that they sum to it."""
    compute, waiting = per_step["compute"], per_step["waiting"]
    means = {
        "compute": compute,
        "waiting": waiting,
        "other": max(0.0, mean_step - compute - waiting),
    }
    total = sum(means.values())
    return {k: v / total * step_s for k, v in means.items()}
