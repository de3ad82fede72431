"""``prefetch_rows``: asynchronous disk reads of a memory-mapped table's rows ahead of a gather
(``csrc/prefetch.cpp``, ``csrc/cpu/prefetch_kernel.cpp``), and its fake kernel."""

from __future__ import annotations

import torch

from graphengine.ops.backend import extension_usable
from graphengine.ops.build import fake_kernel


def prefetch_rows(
    src: torch.Tensor, index: torch.Tensor, slot_of: torch.Tensor | None = None
) -> int:
    """Ask the kernel to read rows ``index`` of a memory-mapped CPU ``src`` ``[num_rows,
    num_cols]`` from disk now, asynchronously (``madvise(MADV_WILLNEED)`` on the pages they
    cover, adjacent rows merged), so that a gather that follows finds them in the page cache
    instead of waiting for one read per fault. Rows with ``slot_of[id] >= 0`` (cached
    elsewhere) and ids out of range are skipped. A hint: returns how many ranges were advised,
    0 where nothing is advised (no extension or the ``"torch"`` backend, or ``src`` or
    ``index`` not on the CPU). ``index`` int32 or int64 ``[n]``."""
    on_cpu = src.device.type == "cpu" and index.device.type == "cpu"
    if not on_cpu or not extension_usable():
        return 0
    return int(torch.ops.graphengine.prefetch_rows(src, index.contiguous(), slot_of))


@fake_kernel("prefetch_rows")
def _fake_prefetch_rows(src, index, slot_of=None):
    return 0
