"""Figures of the parallel benchmarks: hybrid against data parallelism by feature width
(``graphengine bench train --parallel hybrid --plot``), and every candidate's epoch by hosts
and link against the planner's prediction and choice (``graphengine bench plan --plot``)."""

from __future__ import annotations

from pathlib import Path

from graphengine.plot.figure import log_if_wide, new_figure, new_grid, save_figure

MODE_COLORS = {"data": "tab:blue", "hybrid": "tab:orange"}
CANDIDATE_COLORS = {
    "data": "tab:blue",
    "hybrid": "tab:orange",
    "partitioned": "tab:green",
    "hybrid-partitioned": "tab:red",
}
# One line style per hidden width, in the order the widths come.
HIDDEN_STYLES = ("-", "--", ":", "-.")


def plot_parallel_widths(summary: dict, path: str | Path) -> Path:
    """Draw ``graphengine bench train --parallel hybrid``'s summary to ``path``
    (:func:`parallel_widths_figure`'s figure).

    Args:
        summary: the bench's JSON line (see :func:`parallel_widths_figure`).
        path: the image to write (its format from the suffix).

    Returns:
        the path written.
    """
    return save_figure(parallel_widths_figure(summary), path)


def parallel_widths_figure(summary: dict):
    """The figure of ``graphengine bench train --parallel hybrid``'s summary (a matplotlib
    ``Figure``, not saved): left, the measured seconds a step (the slowest worker's) against
    the feature width, one line per mode and hidden width; right, the projected seconds a
    step of bytes sent per worker at the most workers projected, over the summary's link.

    Args:
        summary: the bench's JSON line: ``workers``, ``link_gbps``, ``measured`` (rows with
            ``width``, ``hidden``, ``parallel``, ``s_per_step``) and ``projected`` (rows with
            ``width``, ``hidden``, ``workers``, ``data_s``, ``hybrid_s``).
    """
    figure, (measured_axes, projected_axes) = new_figure(panels=2, width=6.0, height=4.2)
    measured = summary["measured"]
    hiddens = list(dict.fromkeys(row["hidden"] for row in measured))
    for mode in MODE_COLORS:
        for hidden in hiddens:
            rows = [r for r in measured if r["parallel"] == mode and r["hidden"] == hidden]
            _line(measured_axes, rows, "s_per_step", mode, hidden, hiddens)
    measured_axes.set_title(
        f"measured: {summary['workers']} workers on one machine", fontsize="medium"
    )
    measured_axes.set_ylabel("seconds per step (slowest worker)")
    workers = max(row["workers"] for row in summary["projected"])
    projected = [row for row in summary["projected"] if row["workers"] == workers]
    for mode in MODE_COLORS:
        for hidden in hiddens:
            rows = [r for r in projected if r["hidden"] == hidden]
            _line(projected_axes, rows, f"{mode}_s", mode, hidden, hiddens)
    projected_axes.set_title(
        f"projected: bytes sent, {workers} workers, {summary['link_gbps']:g} Gb/s links",
        fontsize="medium",
    )
    projected_axes.set_ylabel("seconds per step on the link (no compute)")
    widths = sorted({row["width"] for row in measured})
    for axes in (measured_axes, projected_axes):
        _width_axis(axes, widths)
        axes.set_ylim(bottom=0)
        axes.grid(alpha=0.3)
        axes.legend(fontsize="small")
    return figure


def _line(axes, rows: list[dict], key: str, mode: str, hidden: int, hiddens: list[int]) -> None:
    """One mode's ``key`` against the width for one hidden width (nothing without rows)."""
    rows = sorted(rows, key=lambda r: r["width"])
    if not rows:
        return
    axes.plot(
        [r["width"] for r in rows],
        [r[key] for r in rows],
        color=MODE_COLORS[mode],
        linestyle=HIDDEN_STYLES[hiddens.index(hidden) % len(HIDDEN_STYLES)],
        marker="o",
        label=f"{mode}, hidden {hidden}",
    )


def _width_axis(axes, widths: list[int]) -> None:
    """The feature width axis: log where the widths span
    :data:`~graphengine.plot.figure.LOG_SPAN` times or more, ticks at the widths measured,
    written as plain numbers."""
    log_if_wide(axes, widths, "x")
    axes.set_xticks(widths)
    axes.set_xticklabels([str(w) for w in widths])
    axes.minorticks_off()
    axes.set_xlabel("feature width F")


def plot_plan_bench(results: list[dict], path: str | Path) -> Path:
    """Draw ``graphengine bench plan``'s configurations to ``path``
    (:func:`plan_bench_figure`'s figure).

    Args:
        results: the summary's ``results`` (see :func:`plan_bench_figure`).
        path: the image to write (its format from the suffix).

    Returns:
        the path written.

    Raises:
        ValueError: no configuration in ``results``.
    """
    return save_figure(plan_bench_figure(results), path)


def plan_bench_figure(results: list[dict]):
    """The figure of ``graphengine bench plan``'s configurations (a matplotlib ``Figure``,
    not saved): a panel per link (the columns, fastest first) and per feature and hidden
    width (the rows), each with every candidate's measured epoch against the host count
    (solid) and the planner's predicted epoch (dashed), the planner's choice ringed; a
    failed run leaves a gap.

    Args:
        results: the summary's ``results``: per configuration ``hosts``, ``link``,
            ``rate_mbit``, ``width``, ``hidden``, ``choice`` (``None`` without a plan) and
            ``candidates`` (name to ``measured`` and ``predicted`` epoch seconds, each
            ``None`` where missing).
    """
    if not results:
        raise ValueError("no configuration to draw")
    rates = {}
    for result in results:
        rates.setdefault(result["link"], result["rate_mbit"])
    links = sorted(rates, key=rates.__getitem__, reverse=True)
    shapes = list(dict.fromkeys((r["width"], r["hidden"]) for r in results))
    candidates = list(dict.fromkeys(name for r in results for name in r["candidates"]))
    hosts = sorted({r["hosts"] for r in results})
    figure, grid = new_grid(
        len(shapes), len(links), (5.2 * len(links) + 2.2, 3.6 * len(shapes)), sharex=True
    )
    for row, (width, hidden) in enumerate(shapes):
        for column, link in enumerate(links):
            axes = grid[row][column]
            chosen = [
                r for r in results if (r["width"], r["hidden"], r["link"]) == (width, hidden, link)
            ]
            _plan_panel(axes, sorted(chosen, key=lambda r: r["hosts"]), candidates)
            axes.set_title(
                f"{link} link ({rates[link]:,.0f} Mbit/s), F={width}, H={hidden}",
                fontsize="medium",
            )
            axes.set_xticks(hosts)
            axes.set_ylim(bottom=0)
            axes.grid(alpha=0.3)
            if column == 0:
                axes.set_ylabel("epoch seconds")
            if row == len(shapes) - 1:
                axes.set_xlabel("hosts (one worker each)")
    # Outside the top right panel, where it hides no line (tight_layout leaves it room).
    grid[0][-1].legend(loc="upper left", bbox_to_anchor=(1.02, 1), fontsize="small")
    return figure


def _plan_panel(axes, results: list[dict], candidates: list[str]) -> None:
    """One link's and shape's candidates, measured and predicted, by host count."""
    hosts = [r["hosts"] for r in results]
    for name in candidates:
        color = CANDIDATE_COLORS.get(name)
        entries = [r["candidates"].get(name, {}) for r in results]
        measured = [_nan(e.get("measured")) for e in entries]
        predicted = [_nan(e.get("predicted")) for e in entries]
        axes.plot(hosts, measured, color=color, marker="o", label=f"{name} measured")
        axes.plot(
            hosts,
            predicted,
            color=color,
            linestyle="--",
            marker="x",
            alpha=0.7,
            label=f"{name} predicted",
        )
    picks = [
        (r["hosts"], r["candidates"][r["choice"]]["measured"])
        for r in results
        if r["choice"] is not None and r["candidates"].get(r["choice"], {}).get("measured")
    ]
    if picks:
        axes.plot(
            [h for h, _ in picks],
            [s for _, s in picks],
            linestyle="none",
            marker="o",
            markersize=14,
            markerfacecolor="none",
            markeredgecolor="black",
            markeredgewidth=1.5,
            label="planner's choice",
        )


def _nan(value: float | None) -> float:
    """``value``, or NaN (a gap in the line) where it is missing."""
    return float("nan") if value is None else value
