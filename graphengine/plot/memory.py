"""The figure of ``graphengine bench train --memory-limits --plot``: training steps from a
store on disk against the memory limit they ran under."""

from __future__ import annotations

from pathlib import Path

from graphengine.plot.figure import new_figure, save_figure

# The bars of a limit: the step's wall time, then the phases that run in it (the loader's
# stages overlap the compute, so they are drawn beside the step, not stacked in it).
BARS = {
    "step": "tab:gray",
    "sample": "tab:blue",
    "gather": "tab:orange",
    "compute": "tab:green",
}


def plot_memory_limits(summary: dict, path: str | Path) -> Path:
    """Draw ``graphengine bench train --memory-limits``'s summary to ``path``
    (:func:`memory_limits_figure`'s figure).

    Args:
        summary: the bench's JSON line (see :func:`memory_limits_figure`).
        path: the image to write (its format from the suffix).

    Returns:
        the path written.
    """
    return save_figure(memory_limits_figure(summary), path)


def memory_limits_figure(summary: dict):
    """The figure of ``graphengine bench train --memory-limits``'s summary (a matplotlib
    ``Figure``, not saved): left, per limit the seconds a step and its sample, gather and
    compute seconds; right, the MB read from disk a step, with the major page faults a step
    written over each bar. A limit whose run failed (the OOM killer) has no bars and says
    why; one whose reads were not measured (``read_mb`` ``None``) has no read bar and says
    "not measured".

    Args:
        summary: the bench's JSON line: ``dataset``, ``store_bytes`` and ``rows``, each
            with ``limit`` (its text), ``limit_bytes`` (``None``: no limit), ``step_s``,
            ``stage_s`` (``sample``, ``gather``, ``compute`` seconds a step), ``read_mb``
            (``None``: not measured), ``major_faults`` and ``error`` (``None`` for a run
            that measured).
    """
    rows = summary["rows"]
    figure, (time_axes, read_axes) = new_figure(panels=2, width=6.0, height=4.2)
    positions = range(len(rows))
    width = 0.8 / len(BARS)
    for index, (name, color) in enumerate(BARS.items()):
        heights = [_seconds(row, name) for row in rows]
        offsets = [p + (index - (len(BARS) - 1) / 2) * width for p in positions]
        label = "step (wall)" if name == "step" else name
        time_axes.bar(offsets, heights, width=width, color=color, label=label)
    time_axes.set_ylabel("seconds per step")
    time_axes.set_title("a step and its phases (pipelined: they overlap)", fontsize="medium")
    time_axes.legend(fontsize="small")
    # A run that failed, or whose reads /proc/self/io could not count, has no bar.
    read = [_read_mb(row) or 0.0 for row in rows]
    bars = read_axes.bar(positions, read, width=0.5, color="tab:purple")
    for bar, row in zip(bars, rows, strict=True):
        if row["error"] is None:
            measured = _read_mb(row) is not None
            read_axes.annotate(
                f"{row['major_faults']:,.0f} major faults" if measured else "not measured",
                (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                ha="center",
                va="bottom",
                fontsize="small",
            )
    read_axes.set_ylabel("MB read from disk per step")
    read_axes.set_title("reads a step (and major page faults a step)", fontsize="medium")
    labels = [_limit_label(row) for row in rows]
    for axes in (time_axes, read_axes):
        axes.set_xticks(list(positions))
        axes.set_xticklabels(labels)
        axes.set_xlabel("memory limit (a cgroup; none: no group)")
        axes.grid(axis="y", alpha=0.3)
        axes.margins(y=0.15)  # room above the bars for the fault counts
        axes.set_ylim(bottom=0)
        for position, row in zip(positions, rows, strict=True):
            if row["error"] is not None:
                # From just above the axis, in axes units: the panel's scale does not matter.
                axes.text(
                    position,
                    0.03,
                    row["error"],
                    rotation=90,
                    ha="center",
                    va="bottom",
                    transform=axes.get_xaxis_transform(),
                )
    store = _size(summary["store_bytes"])
    figure.suptitle(f"{summary['dataset']} ({store} on disk), each run cold")
    return figure


def _read_mb(row: dict) -> float | None:
    """A row's MB read a step; ``None`` where its run failed or its reads were not counted."""
    return row["read_mb"] if row["error"] is None else None


def _seconds(row: dict, name: str) -> float:
    """A row's seconds a step of ``name`` (0 where the run failed)."""
    if row["error"] is not None:
        return 0.0
    return row["step_s"] if name == "step" else row["stage_s"][name]


def _limit_label(row: dict) -> str:
    """``none``, or the limit's text and its GB."""
    if row["limit_bytes"] is None:
        return "none"
    return f"{row['limit']}\n{_size(row['limit_bytes'])}"


def _size(size: int) -> str:
    """Bytes as GB, or as MB below one GB."""
    return f"{size / 1e9:.2f} GB" if size >= 1e9 else f"{size / 1e6:.1f} MB"
