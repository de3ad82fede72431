"""``read_rows``: rows of a row-major table read straight from a file descriptor with many reads
in flight (``csrc/read_rows.cpp``, ``csrc/cpu/read_rows_kernel.cpp``), and its fake kernel.
:class:`graphengine.data.row_file.RowFile` is the object to use; this is its kernel."""

from __future__ import annotations

import torch

from graphengine.ops.backend import require_extension
from graphengine.ops.build import fake_kernel

#: The extension's read engines: a ring per calling thread, or a pool of blocking ``pread``s.
ENGINES = ("io_uring", "pread")
MAX_QUEUE_DEPTH = 4096


def read_rows(
    fd: int,
    ids: torch.Tensor,
    out: torch.Tensor,
    *,
    offset: int,
    row_bytes: int,
    num_rows: int,
    engine: str,
    queue_depth: int,
    align: int = 0,
) -> dict:
    """Read rows ``ids`` (int32 or int64 ``[n]`` CPU, any order, repeats allowed) of the
    row-major table of ``num_rows`` rows of ``row_bytes`` bytes stored at byte ``offset`` of
    the open file ``fd`` into ``out`` (a contiguous CPU tensor of ``n * row_bytes`` bytes, any
    dtype), with up to ``queue_depth`` reads in flight through ``engine`` (:data:`ENGINES`).
    ``align > 0``: ``fd`` was opened with ``O_DIRECT`` and every read's offset, length and
    buffer are aligned to ``align`` bytes (a power of two); ``0``: buffered.

    Returns ``{"reads": requests issued, "bytes": bytes read from the file, "runs": reads
    planned}`` (distinct ids adjacent in the file are one run). Raises ``IndexError`` naming an
    id out of ``[0, num_rows)`` and its position before reading anything, ``ValueError`` or
    ``TypeError`` for bad arguments, ``RuntimeError`` naming the row, its offset and the bytes
    that came back where the file is shorter than the table, or errno's text where a read
    fails, and :class:`graphengine.ops.ExtensionUnavailableError` without the extension.
    """
    _check(fd, ids, out, offset, row_bytes, num_rows, engine, queue_depth, align)
    require_extension("read_rows")
    reads, nbytes, runs = torch.ops.graphengine.read_rows(
        fd, ids, out, offset, row_bytes, num_rows, engine, queue_depth, align
    )
    return {"reads": int(reads), "bytes": int(nbytes), "runs": int(runs)}


def io_uring_probe() -> str:
    """``""`` where the calling thread can set up an io_uring, else why not (errno's text:
    ENOSYS without io_uring, EPERM where seccomp or ``kernel.io_uring_disabled`` refuses it)."""
    require_extension("io_uring_probe")
    return str(torch.ops.graphengine.io_uring_probe())


def _check(fd, ids, out, offset, row_bytes, num_rows, engine, queue_depth, align) -> None:
    for name, value, low in (
        ("fd", fd, 0),
        ("offset", offset, 0),
        ("row_bytes", row_bytes, 1),
        ("num_rows", num_rows, 0),
        ("queue_depth", queue_depth, 1),
        ("align", align, 0),
    ):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"read_rows: '{name}' must be an int (got {type(value).__name__})")
        if value < low:
            raise ValueError(f"read_rows: '{name}' must be >= {low} (got {value})")
    if queue_depth > MAX_QUEUE_DEPTH:
        raise ValueError(
            f"read_rows: 'queue_depth' must be <= {MAX_QUEUE_DEPTH} (got {queue_depth})"
        )
    if align & (align - 1):
        raise ValueError(f"read_rows: 'align' must be 0 or a power of two (got {align})")
    if engine not in ENGINES:
        raise ValueError(f"read_rows: 'engine' must be one of {ENGINES} (got {engine!r})")
    if not isinstance(ids, torch.Tensor) or not isinstance(out, torch.Tensor):
        raise TypeError("read_rows: 'ids' and 'out' must be torch tensors")
    if ids.dtype not in (torch.int32, torch.int64) or ids.dim() != 1:
        raise TypeError(
            f"read_rows: 'ids' must be a 1-D int32 or int64 tensor (got {ids.dtype} "
            f"{tuple(ids.shape)})"
        )
    if ids.device.type != "cpu" or out.device.type != "cpu":
        raise ValueError(
            f"read_rows: 'ids' and 'out' must be on the CPU (got {ids.device}, {out.device})"
        )
    if not ids.is_contiguous() or not out.is_contiguous():
        raise ValueError("read_rows: 'ids' and 'out' must be contiguous")
    if out.numel() * out.element_size() != ids.numel() * row_bytes:
        raise ValueError(
            f"read_rows: 'out' must hold {ids.numel()} rows of {row_bytes} bytes "
            f"({ids.numel() * row_bytes} bytes; got {out.numel() * out.element_size()})"
        )


@fake_kernel("read_rows")
def _fake_read_rows(fd, ids, out, offset, row_bytes, num_rows, engine, queue_depth, align):
    return [0, 0, 0]
