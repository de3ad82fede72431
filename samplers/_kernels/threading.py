"""Numba's threading layer for kernels that several sampling threads run at once.

Numba's ``workqueue`` layer aborts the process when two threads launch parallel kernels at
the same time; ``omp`` and ``tbb`` allow it. :func:`parallel_guard` picks a thread-safe layer
before the first parallel kernel runs (unless the user chose one with
``NUMBA_THREADING_LAYER``), checks which layer Numba loaded, and, where only ``workqueue``
is there, hands out a lock so that parallel kernels run one at a time instead of crashing.
Under ``NUMBA_DISABLE_JIT=1`` the kernels are plain Python and no layer is loaded.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator

import numba
import numpy as np
from numba import njit, prange

log = logging.getLogger(__name__)

THREADSAFE_LAYERS = ("omp", "tbb")

_lock = threading.Lock()
_serial = threading.Lock()
_guard: contextlib.AbstractContextManager | None = None


@njit(parallel=True, cache=True)
def _touch(values):
    total = 0
    for i in prange(values.shape[0]):
        total += values[i]
    return total


def parallel_guard() -> contextlib.AbstractContextManager:
    """A context manager to hold around each launch of a parallel kernel: a no-op on a
    thread-safe layer, a process-wide lock on ``workqueue``. The first call loads the layer."""
    global _guard
    with _lock:
        if _guard is None and numba.config.DISABLE_JIT:
            # Numba's debugging switch: the kernels run as plain Python (prange is range), so
            # no threading layer is ever loaded and there is none to ask for.
            _guard = contextlib.nullcontext()
        if _guard is None:
            if numba.config.THREADING_LAYER == "default":
                numba.config.THREADING_LAYER = "threadsafe"
            try:
                _touch(np.zeros(1, dtype=np.int64))
            except ValueError:  # no thread-safe layer could be loaded: use what there is
                numba.config.THREADING_LAYER = "workqueue"
                _touch(np.zeros(1, dtype=np.int64))
            layer = numba.threading_layer()
            if layer in THREADSAFE_LAYERS:
                _guard = contextlib.nullcontext()
            else:
                log.warning(
                    "Numba's threading layer is %r, which cannot run kernels from several "
                    "threads at once: sampling threads take turns (install tbb for more)",
                    layer,
                )
                _guard = _serial
        return _guard


@contextlib.contextmanager
def numba_threads(count: int | None) -> Iterator[None]:
    """Run the block with the calling thread's Numba thread count at ``count`` (capped at
    ``NUMBA_NUM_THREADS``), restoring the thread's previous count after it, so that a sampler
    leaves its caller's setting as it found it; ``None`` changes nothing."""
    if count is None:
        yield
        return
    previous = numba.get_num_threads()
    numba.set_num_threads(min(count, numba.config.NUMBA_NUM_THREADS))
    try:
        yield
    finally:
        numba.set_num_threads(previous)
