"""matplotlib, imported only when a figure is drawn, and the figures' common shape.

Figures are built as :class:`matplotlib.figure.Figure` objects, without pyplot: drawing one
neither switches the user's backend (a notebook keeps its inline one) nor registers it with
pyplot's figure manager, so nothing needs closing."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

PLOT_HINT = "pip install 'graphengine[plot]' (or pip install matplotlib)"
# A value axis whose positive values span this ratio or more is drawn on a log scale.
LOG_SPAN = 10.0


def require_matplotlib() -> ModuleType:
    """The ``matplotlib`` module, its backend untouched; an ``ImportError`` saying how to
    install it when it is missing."""
    try:
        return importlib.import_module("matplotlib")
    except ImportError as error:
        raise ImportError(f"plotting needs matplotlib: {PLOT_HINT}") from error


def new_grid(rows: int, columns: int, size: tuple[float, float], **subplots) -> tuple[Any, Any]:
    """A figure of ``size`` inches holding a ``rows`` x ``columns`` grid of axes; returns
    the figure and the 2-D array of its axes (``subplots`` go to ``Figure.subplots``)."""
    require_matplotlib()
    from matplotlib.figure import Figure

    figure = Figure(figsize=size)
    return figure, figure.subplots(rows, columns, squeeze=False, **subplots)


def new_figure(panels: int = 1, width: float = 6.4, height: float = 4.0) -> tuple[Any, list]:
    """A figure of ``panels`` side by side, each ``width`` x ``height`` inches; returns the
    figure and its list of axes."""
    figure, grid = new_grid(1, panels, (width * panels, height))
    return figure, list(grid[0])


def save_figure(figure, path: str | Path) -> Path:
    """Write ``figure`` to ``path`` (its format from the suffix: ``.png``, ``.svg``, ``.pdf``);
    returns the path."""
    path = Path(path)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    return path


def log_if_wide(axes, values: Sequence[float], axis: str) -> bool:
    """Log-scale ``axes``' ``axis`` (``"x"`` or ``"y"``) where the positive ``values`` span
    :data:`LOG_SPAN` times or more; returns whether it did."""
    positive = [v for v in values if v > 0]
    wide = bool(positive) and max(positive) >= LOG_SPAN * min(positive)
    if wide:
        (axes.set_xscale if axis == "x" else axes.set_yscale)("log")
    return wide


def threads(count: int) -> str:
    """``1 thread``, ``2 threads`` ..."""
    return f"{count} thread" + ("s" if count != 1 else "")
