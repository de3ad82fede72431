"""Host memory for training on the CPU: the host cache the library uses, and the process-wide
glibc setting the CLI applies (never on import).

glibc returns every freed block above its mmap threshold to the kernel and maps a
fresh one on the next allocation, so each training step of a GNN on a large batch
(activations of hundreds of MB) pays its page faults again: measured here, GraphSAGE
(3 x 256) on a 15,10,5 batch of synthetic-products spent most of its step in the
kernel (sys 17.7 s of 20 s) and took 3.5 s a step; with freed memory kept for reuse,
1.1 s. PyTorch's CUDA allocator caches for the same reason.

The library gets the same reuse without a process-wide setting: while one of its loaders is
iterated or its Trainer fits, :func:`host_memory_cache` serves torch's large CPU blocks (4 MB
and up: activations, gradients, batches) and the gathers' outputs from graphengine's buffer
pool (``csrc/cpu/buffer_pool.cpp``, ``host_cache.cpp``), and hands the cached buffers back to
the system when the last such span ends. Measured here (GraphSAGE 3 x 256 on synthetic-
products, as a library user's process): 0.67 s a step without it, 0.40-0.43 s with it, as fast
as with the glibc setting. The trade-off: during those spans the process keeps freed large
blocks for reuse (at most a quarter of the machine's memory), and those blocks are not
reported to torch's CPU memory profiler. Opt out with ``GRAPHENGINE_HOST_CACHE=0`` in the
environment or :func:`set_host_memory_cache` ``(False)``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager

import torch

from graphengine import ops

log = logging.getLogger(__name__)

_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3
_INT_MAX = 2**31 - 1

HOST_CACHE_ENV = "GRAPHENGINE_HOST_CACHE"
_host_cache: dict[str, bool] = {}  # "enabled": the switch, once read or set


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


def set_host_memory_cache(enabled: bool) -> bool:
    """Turn the host cache of graphengine's loaders and Trainer on or off for the process
    (spans already open keep theirs); returns the previous setting. The default is on, unless
    ``GRAPHENGINE_HOST_CACHE`` is ``0``, ``false``, ``no`` or ``off``."""
    if not isinstance(enabled, bool):
        raise ValueError(f"'enabled' must be a bool (got {enabled!r})")
    previous = host_memory_cache_enabled()
    _host_cache["enabled"] = enabled
    return previous


def host_memory_cache_enabled() -> bool:
    """Whether :func:`host_memory_cache` spans cache (see :func:`set_host_memory_cache`)."""
    if "enabled" not in _host_cache:
        value = os.environ.get(HOST_CACHE_ENV, "1").strip().lower()
        _host_cache["enabled"] = value not in ("0", "false", "no", "off")
    return _host_cache["enabled"]


@contextmanager
def host_memory_cache() -> Iterator[bool]:
    """A span in which torch's large CPU blocks are reused instead of mapped afresh; yields
    whether it caches (``False`` when turned off, without the C++ extension, or where another
    CPU allocator holds torch's slot). Spans nest and may overlap across threads; the cached
    buffers go back to the system when the last one ends."""
    active = (
        host_memory_cache_enabled()
        and (ops.library_path() is not None or ops.get_backend() != "torch")
        and ops.build_extension()
        and bool(torch.ops.graphengine.host_cache_open())
    )
    try:
        yield active
    finally:
        if active:
            torch.ops.graphengine.host_cache_close()


def host_memory_cache_state() -> tuple[int, int, int]:
    """``(open spans, bytes cached for reuse, bytes taken from the system so far)`` of the host
    cache; the last grows with every request no cached buffer served (a step that reuses
    grows it by 0). ``(0, 0, 0)`` before the extension is loaded."""
    if ops.library_path() is None:
        return 0, 0, 0
    spans, cached, fresh = torch.ops.graphengine.host_cache_state()
    return int(spans), int(cached), int(fresh)
