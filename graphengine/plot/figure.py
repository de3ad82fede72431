"""matplotlib, imported only when a figure is drawn, and the figures' common shape."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import Any

PLOT_HINT = "pip install 'graphengine[plot]' (or pip install matplotlib)"


def pyplot() -> ModuleType:
    """``matplotlib.pyplot`` on the Agg backend (files only, no display needed); an
    ``ImportError`` saying how to install it when matplotlib is missing."""
    try:
        matplotlib = importlib.import_module("matplotlib")
    except ImportError as error:
        raise ImportError(f"plotting needs matplotlib: {PLOT_HINT}") from error
    matplotlib.use("Agg")
    return importlib.import_module("matplotlib.pyplot")


def new_figure(panels: int = 1, width: float = 6.4, height: float = 4.0) -> tuple[Any, list]:
    """A figure of ``panels`` side by side, each ``width`` x ``height`` inches; returns the
    figure and its list of axes."""
    plt = pyplot()
    figure, axes = plt.subplots(1, panels, figsize=(width * panels, height), squeeze=False)
    return figure, list(axes[0])


def save_figure(figure, path: str | Path) -> Path:
    """Write ``figure`` to ``path`` (its format from the suffix: ``.png``, ``.svg``, ``.pdf``)
    and close it; returns the path."""
    path = Path(path)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    pyplot().close(figure)
    return path
