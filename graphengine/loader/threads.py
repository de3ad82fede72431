"""How a loader's threads share the cores: each sampling call takes its share of Numba's
threads, each gathering thread its share of torch's intra-op threads, both of the thread
that builds the loader."""

from __future__ import annotations

from collections.abc import Sequence

import numba
import torch

from graphengine.loader.pipeline import Stage
from graphengine.loader.stages import InWorkerThreads


def sampler_threads(num_workers: int) -> int:
    """Numba threads per sampling call when ``num_workers`` threads sample at once: the
    threads Numba may use in the calling thread (``numba.get_num_threads()``: all cores
    unless set lower) shared among them."""
    return max(1, numba.get_num_threads() // max(num_workers, 1))


def share_torch_threads(stages: Sequence[Stage]) -> list[Stage]:
    """``stages`` as the pipeline's threads run them: a ``"gather"`` stage of several threads
    runs each in its share of torch's intra-op threads (:class:`InWorkerThreads`), so that
    they split the cores instead of each sizing its parallel gathers to all of them."""
    threaded = []
    for stage in stages:
        share = max(1, torch.get_num_threads() // stage.workers)
        if stage.name == "gather" and share < torch.get_num_threads():
            stage = Stage(stage.name, InWorkerThreads(stage.function, share), stage.workers)
        threaded.append(stage)
    return threaded
