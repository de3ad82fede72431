"""Parallel strategies: how one training step is split across workers.

:class:`DataParallel` (every worker a full model replica, seeds split, gradients
all-reduced) is the first; partitioned and hybrid model-parallel strategies come beside it.
"""

from graphengine.parallel.base import SingleProcess, Strategy
from graphengine.parallel.data_parallel import DataParallel, strategy_for

__all__ = ["DataParallel", "SingleProcess", "Strategy", "strategy_for"]
