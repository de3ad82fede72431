"""Figures of benchmark results and training runs, drawn with matplotlib (the optional
``plot`` extra: ``pip install graphengine[plot]``).

Each ``graphengine bench ... --plot FILE.png`` draws its results with a function of this package,
and ``graphengine plot METRICS.jsonl`` draws a training run from the JSON lines
``graphengine train`` prints. Nothing else in graphengine imports matplotlib. Each
``plot_*`` function writes its figure and returns the path written; the helpers shared by the
figures are in :mod:`graphengine.plot.figure`.
"""

from graphengine.plot.memory import plot_memory_limits
from graphengine.plot.metrics import plot_metrics, read_metrics
from graphengine.plot.parallel import plot_parallel_widths, plot_plan_bench
from graphengine.plot.sampling import plot_loaders, plot_scaling
from graphengine.plot.training import plot_step

__all__ = [
    "plot_loaders",
    "plot_memory_limits",
    "plot_metrics",
    "plot_parallel_widths",
    "plot_plan_bench",
    "plot_scaling",
    "plot_step",
    "read_metrics",
]
