"""Host memory for training on the CPU: the host cache the library uses, and the process-wide
glibc setting the CLI applies (never on import).

glibc returns every freed block above its mmap threshold to the kernel and maps a fresh one on
the next allocation, so each training step of a GNN on a large batch (activations of hundreds
of MB) pays its page faults again, and on a large batch those faults take a large share of the
step (docs/benchmarks-archive.md, issue 15, has the measurements). PyTorch's CUDA allocator
caches for the same reason.

The library gets the reuse without a process-wide setting, in one place:
:func:`host_memory_cache`, a span entered while one of its loaders is iterated or its Trainer
fits. In a span, torch's large CPU blocks (4 MB and up: activations, gradients, batches) and
the gathers' outputs come from graphengine's buffer pool (``csrc/cpu/buffer_pool.cpp``,
``csrc/cpu/host_cache_kernel.cpp``), and the cached buffers go back to the system when the
last span ends; steps run about as fast as with the glibc setting. The trade-off: during the
spans the process keeps freed large blocks for reuse (at most a quarter of the machine's
memory, or a sixteenth of the process's cgroup limit where that is smaller), and those blocks
are not reported to torch's CPU memory profiler. Opt out with ``GRAPHENGINE_HOST_CACHE=0`` in the
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

from graphengine.data.disk_io import proc_field
from graphengine.data.memory import memory_limit
from graphengine.ops.backend import extension_loaded, extension_usable

log = logging.getLogger(__name__)

_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3
_INT_MAX = 2**31 - 1

HOST_CACHE_ENV = "GRAPHENGINE_HOST_CACHE"
#: The share of a cgroup's memory limit the buffer pool keeps for reuse at most.
LIMITED_POOL_SHARE = 1 / 16
_host_cache: dict[str, bool] = {}  # "enabled": the switch; "pool_limit": the pool capped


def tune_host_allocator() -> bool:
    """Make glibc keep freed memory for reuse instead of returning it to the kernel.

    Large blocks come from the heap (mmap threshold at its maximum), the heap grows in
    steps of 1 GiB and is not trimmed. Returns ``False`` where the C library is not
    glibc, or where the process runs under a memory limit smaller than the machine's (a
    cgroup's): nothing is changed there. The process then holds on to its peak memory, which
    under a limit starves the page cache its data is read through (and a heap that grows in
    1 GiB steps may pass the limit).
    """
    if _under_cgroup_limit():
        log.info("under a memory limit: the host allocator keeps glibc's defaults")
        return False
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
    whether it caches. Where graphengine's loaders compile its extension ahead of their first
    batch (a gather or fused layer used outside any loader compiles it on first use), and the
    one place it changes torch's CPU allocator on the library user's behalf.

    Who enters it: every graphengine loader, for exactly one pass, as its iterator starts
    (``StagedLoader._iterate`` in ``graphengine/loader/pipeline.py``, inline and pipelined
    alike, so the batches and the caller's training step on them share the span), the
    Trainer's fit, and the benchmarks. Nothing else compiles the extension or swaps the
    allocator while a loader is iterated.

    What entering does, when :func:`host_memory_cache_enabled`:

    1. the extension: if it is not loaded yet and the ops backend allows it
       (:func:`graphengine.ops.backend.extension_usable`: not ``"torch"``), it is compiled
       here, once per process (cached on disk afterwards; see :mod:`graphengine.ops.build`);
       with the ``"torch"`` backend an extension loaded earlier is still used;
    2. the allocator: on the first span of the process, graphengine's caching allocator is
       installed in front of torch's CPU allocator, for good (outside spans it hands every
       request to the allocator it replaced); then the span opens, and blocks of 4 MB and up
       come from the buffer pool until the last open span ends, when the pool's buffers go
       back to the system.

    Yields ``False`` (and changes nothing) when the cache is turned off, the extension is not
    usable, or another CPU allocator holds torch's slot. Spans nest and may overlap across
    threads."""
    active = (
        host_memory_cache_enabled()
        and (extension_loaded() or extension_usable())
        and _limit_pool()
        and bool(torch.ops.graphengine.host_cache_open())
    )
    try:
        yield active
    finally:
        if active:
            torch.ops.graphengine.host_cache_close()


def _limit_pool() -> bool:
    """Once per process, before the first span: under a memory limit smaller than the
    machine's (a cgroup's), keep at most :data:`LIMITED_POOL_SHARE` of it for reuse, not a
    quarter of the machine's memory (the pool's default): such a process needs its memory for
    its data (a store larger than its limit, whose graph pages the pool would evict). Returns
    True."""
    if "pool_limit" not in _host_cache:
        limited = _under_cgroup_limit()
        _host_cache["pool_limit"] = limited
        if limited:
            torch.ops.graphengine.host_cache_limit(int(memory_limit() * LIMITED_POOL_SHARE))
    return True


def _under_cgroup_limit() -> bool:
    """Whether this process's memory limit is smaller than the machine's memory."""
    limit = memory_limit()
    total = proc_field("/proc/meminfo", "MemTotal")
    return limit is not None and total is not None and limit < total * 1024


def host_memory_cache_state() -> tuple[int, int, int]:
    """``(open spans, bytes cached for reuse, bytes taken from the system so far)`` of the host
    cache; the last grows with every request no cached buffer served (a step that reuses
    grows it by 0). ``(0, 0, 0)`` before the extension is loaded."""
    if not extension_loaded():
        return 0, 0, 0
    spans, cached, fresh = torch.ops.graphengine.host_cache_state()
    return int(spans), int(cached), int(fresh)
