"""Figures of the sampling benchmarks: ``graphengine bench scaling --plot`` (the cost per
sampled edge against graph size, one line per library) and ``graphengine bench sample
--plot`` (each loader's throughput, one bar per row of the bench's table)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from graphengine.plot.figure import log_if_wide, new_figure, save_figure, threads

# The libraries of ``bench scaling``, in the figure's order: summary key -> legend label and
# color (each library's the same in every figure).
SCALING_LINES = {
    "ns_per_edge": ("graphengine NeighborSampler", "C0"),
    "pyg_ns_per_edge": ("PyG NeighborLoader (graph only)", "C1"),
    "dgl_ns_per_edge": ("DGL DataLoader + NeighborSampler (graph only)", "C2"),
}


def plot_scaling(summary: dict, path: str | Path) -> Path:
    """Draw ``bench scaling``'s cost per sampled edge against the graph's nodes to ``path``
    (:func:`scaling_figure`'s figure).

    Args:
        summary: ``bench scaling``'s JSON line (see :func:`scaling_figure`).
        path: the figure's file; its suffix gives the format (``.png``, ``.svg``, ``.pdf``).

    Returns:
        the path written.
    """
    return save_figure(scaling_figure(summary), path)


def scaling_figure(summary: dict):
    """The figure of ``bench scaling``'s cost per sampled edge against the graph's nodes, one
    line per library (a matplotlib ``Figure``, not saved).

    Args:
        summary: ``bench scaling``'s JSON line: ``ns_per_edge`` (graphengine's) and, for each
            peer timed, ``pyg_ns_per_edge`` or ``dgl_ns_per_edge``, each a dict from
            ``"2^k"`` (the graph has ``2**k`` nodes) to nanoseconds per sampled edge (a
            float); ``fanouts`` (list of int), ``batch_size`` and ``threads`` (int) for the
            title. A peer that could not run (its key holds why, a str) gets no line.

    The x axis is the nodes, ``2**k``, on a log2 scale; the y axis is log-scaled where the
    values span :data:`~graphengine.plot.figure.LOG_SPAN` times or more. Each point is
    labeled with its value.
    """
    figure, (axes,) = new_figure(width=7.2, height=4.5)
    from matplotlib.ticker import ScalarFormatter  # after new_figure: its error if it is missing

    values = []
    sizes = set()
    for key, (label, color) in SCALING_LINES.items():
        costs = summary.get(key)
        if not isinstance(costs, dict):
            continue
        nodes = [2 ** _log2(size) for size in costs]
        axes.plot(nodes, list(costs.values()), marker="o", color=color, label=label)
        for x, y in zip(nodes, costs.values(), strict=True):
            axes.annotate(
                f"{y:,.0f}" if y >= 100 else f"{y:.3g}",
                (x, y),
                textcoords="offset points",
                xytext=(0, 6),
                ha="center",
                fontsize="x-small",
                color=color,
            )
        values += list(costs.values())
        sizes.update(nodes)
    axes.set_xscale("log", base=2)
    axes.set_xticks(sorted(sizes), [f"$2^{{{n.bit_length() - 1}}}$" for n in sorted(sizes)])
    axes.minorticks_off()
    if log_if_wide(axes, values, "y"):
        axes.yaxis.set_major_formatter(ScalarFormatter())  # 10, 100, 1000: not 10^1 ...
    else:
        axes.set_ylim(bottom=0)
    axes.margins(x=0.06, y=0.1)  # room for the points' labels
    axes.set_xlabel("graph nodes (mean degree 23)")
    axes.set_ylabel("ns per sampled edge (lower is better)")
    axes.set_title(
        f"Sampling cost as the graph grows: fanouts {_fanouts(summary['fanouts'])}, "
        f"batches of {summary['batch_size']}, {threads(summary['threads'])}",
        fontsize="medium",
    )
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize="small")
    return figure


def plot_loaders(
    headers: Sequence[str],
    rows: Sequence[Sequence],
    columns: Sequence[str],
    title: str,
    path: str | Path,
) -> Path:
    """Draw a loader bench's table as horizontal bars to ``path`` (:func:`loaders_figure`'s
    figure; the arguments before ``path`` are its).

    Args:
        headers: the table's headers.
        rows: the table's rows.
        columns: the headers of the values drawn.
        title: the figure's title.
        path: the figure's file; its suffix gives the format.

    Returns:
        the path written.
    """
    return save_figure(loaders_figure(headers, rows, columns, title), path)


def loaders_figure(
    headers: Sequence[str], rows: Sequence[Sequence], columns: Sequence[str], title: str
):
    """The figure of a loader bench's table as horizontal bars, one panel per column of
    ``columns`` and one bar per row with a number there (a matplotlib ``Figure``, not saved).

    Args:
        headers: the table's headers; the first column holds each row's label.
        rows: the table's rows (``headers``' order); a cell that is not a number (``"-"``:
            a peer that could not run) gets no bar.
        columns: the headers of the values drawn, e.g. ``["seeds/s", "edges/s"]``.
        title: the figure's title (the dataset and the loaders' parameters).

    Bars run top to bottom in the table's order, each labeled with its value and colored by
    its library (PyG's and DGL's rows by their labels' first word); an axis whose values
    span :data:`~graphengine.plot.figure.LOG_SPAN` times or more is log-scaled.
    """
    labels = [str(row[0]) for row in rows]
    figure, panels = new_figure(len(columns), width=5.6, height=0.9 + 0.45 * len(rows))
    from matplotlib.ticker import EngFormatter  # after new_figure: its error if it is missing

    for axes, column in zip(panels, columns, strict=True):
        at = list(headers).index(column)
        drawn = [(i, row[at]) for i, row in enumerate(rows) if _is_number(row[at])]
        colors = [_library_color(labels[i]) for i, _ in drawn]
        bars = axes.barh([i for i, _ in drawn], [v for _, v in drawn], color=colors)
        axes.bar_label(bars, labels=[_short(v) for _, v in drawn], padding=3, fontsize="small")
        axes.set_yticks(range(len(rows)), labels if axes is panels[0] else [])
        top_down(axes, len(rows))
        log_if_wide(axes, [v for _, v in drawn], "x")
        axes.xaxis.set_major_formatter(EngFormatter())
        axes.margins(x=0.2)
        axes.set_xlabel(f"{column} (higher is better)")
        axes.grid(True, axis="x", alpha=0.3)
    figure.suptitle(title, fontsize="medium")
    return figure


def top_down(axes, bars: int) -> None:
    """Rows ``0 .. bars - 1`` of horizontal bars from the top down, each a bar's height of
    the axes however few there are (one bar would otherwise fill them)."""
    axes.set_ylim(max(bars, 3) - 0.5, -0.5)


def _library_color(label: str) -> str:
    """A row's color by the library its label starts with (graphengine's otherwise), as
    :data:`SCALING_LINES` colors the libraries."""
    for prefix, color in (("PyG", "C1"), ("DGL", "C2")):
        if label.startswith(prefix):
            return color
    return "C0"


def _log2(size: str) -> int:
    """``k`` of a ``"2^k"`` key of ``bench scaling``'s summary."""
    return int(size.removeprefix("2^"))


def _fanouts(fanouts: Sequence[int]) -> str:
    return ",".join(map(str, fanouts))


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _short(value: float) -> str:
    """A bar's label: three significant digits with an SI prefix (``12.3 M``)."""
    for prefix, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}"
    return f"{value:.3g}"
