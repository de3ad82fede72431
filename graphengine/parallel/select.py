"""The registry of parallel strategies a run picks by name (``--parallel data`` or
``hybrid``): a new strategy is a module of its own and one line in :data:`STRATEGIES`."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.distributed as dist

from graphengine.parallel.base import SingleProcess, Strategy
from graphengine.parallel.data_parallel import DataParallel
from graphengine.parallel.hybrid import HybridParallel


def _joined_workers() -> int:
    """The workers of the joined process group; 1 without one."""
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def _data(device: torch.device) -> Strategy:
    """:class:`DataParallel` with several workers, else :class:`SingleProcess`."""
    return DataParallel(device) if _joined_workers() > 1 else SingleProcess(device)


def _hybrid(device: torch.device) -> Strategy:
    """:class:`HybridParallel`, which needs 2 or more workers in a process group."""
    if not (dist.is_available() and dist.is_initialized()):
        raise ValueError(
            "--parallel hybrid needs 2 or more workers in a process group "
            "(graphengine train --nproc N, or torchrun)"
        )
    return HybridParallel(device)


#: Each parallel mode's strategy for the joined process group, built for a device.
STRATEGIES: dict[str, Callable[[torch.device], Strategy]] = {"data": _data, "hybrid": _hybrid}
#: The names ``--parallel`` takes: ``"data"`` and ``"hybrid"``.
PARALLEL_MODES = tuple(STRATEGIES)


def strategy_for(device: str | torch.device = "cpu", parallel: str = "data") -> Strategy:
    """The strategy of ``parallel`` (one of :data:`PARALLEL_MODES`) for the joined process
    group: ``'data'`` is :class:`DataParallel` with several workers, else
    :class:`~graphengine.parallel.base.SingleProcess`; ``'hybrid'`` is
    :class:`~graphengine.parallel.hybrid.HybridParallel` (2 or more workers)."""
    if parallel not in STRATEGIES:
        raise ValueError(f"'parallel' must be one of {PARALLEL_MODES} (got {parallel!r})")
    return STRATEGIES[parallel](torch.device(device))
