"""Choosing the strategy for a run: ``--parallel data`` or ``hybrid``."""

from __future__ import annotations

import torch
import torch.distributed as dist

from graphengine.parallel.base import SingleProcess, Strategy
from graphengine.parallel.data_parallel import DataParallel
from graphengine.parallel.hybrid import HybridParallel

PARALLEL_MODES = ("data", "hybrid")


def strategy_for(device: str | torch.device = "cpu", parallel: str = "data") -> Strategy:
    """The strategy of ``parallel`` for the joined process group: ``'data'`` is
    :class:`DataParallel` with several workers, else
    :class:`~graphengine.parallel.base.SingleProcess`; ``'hybrid'`` is
    :class:`~graphengine.parallel.hybrid.HybridParallel` (2 or more workers)."""
    if parallel not in PARALLEL_MODES:
        raise ValueError(f"'parallel' must be one of {PARALLEL_MODES} (got {parallel!r})")
    joined = dist.is_available() and dist.is_initialized()
    if parallel == "hybrid":
        if not joined:
            raise ValueError(
                "--parallel hybrid needs 2 or more workers in a process group "
                "(graphengine train --nproc N, or torchrun)"
            )
        return HybridParallel(device)
    if joined and dist.get_world_size() > 1:
        return DataParallel(device)
    return SingleProcess(device)
