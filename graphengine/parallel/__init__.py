"""Parallel strategies: how one training step is split across workers.

:class:`DataParallel`: every worker a full model replica, seeds split, gradients
all-reduced. :class:`HybridParallel` (P3): feature columns and the first layer split across
the workers, the layers after it data-parallel.
"""

from graphengine.parallel.base import SingleProcess, Strategy
from graphengine.parallel.data_parallel import DataParallel
from graphengine.parallel.hybrid import HybridParallel
from graphengine.parallel.select import PARALLEL_MODES, strategy_for

__all__ = [
    "PARALLEL_MODES",
    "DataParallel",
    "HybridParallel",
    "SingleProcess",
    "Strategy",
    "strategy_for",
]
