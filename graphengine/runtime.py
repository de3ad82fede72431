"""Process-wide settings for training on the CPU, applied by the CLI, never on import.

glibc returns every freed block above its mmap threshold to the kernel and maps a
fresh one on the next allocation, so each training step of a GNN on a large batch
(activations of hundreds of MB) pays its page faults again: measured here, GraphSAGE
(3 x 256) on a 15,10,5 batch of synthetic-products spent most of its step in the
kernel (sys 17.7 s of 20 s) and took 3.5 s a step; with freed memory kept for reuse,
1.1 s. PyTorch's CUDA allocator caches for the same reason.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger(__name__)

_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3
_INT_MAX = 2**31 - 1


def tune_host_allocator() -> bool:
    """Make glibc keep freed memory for reuse instead of returning it to the kernel.

    Large blocks come from the heap (mmap threshold at its maximum), the heap grows in
    steps of 1 GiB and is not trimmed. Returns ``False`` where the C library is not
    glibc (nothing is changed there). The process then holds on to its peak memory.
    """
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        log.info("no glibc mallopt here; the host allocator keeps its defaults")
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    settings = {_M_MMAP_THRESHOLD: _INT_MAX, _M_TRIM_THRESHOLD: _INT_MAX, _M_TOP_PAD: 2**30}
    return all(mallopt(option, value) == 1 for option, value in settings.items())
