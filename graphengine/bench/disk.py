"""``graphengine bench disk``: random reads of a scratch file through ``read_rows`` with each
engine, O_DIRECT and buffered, at 1 and at 64 reads in flight (the disk's queue-depth curve
that decides :data:`graphengine.data.row_file.AUTO_ORDER`)."""

from __future__ import annotations

import errno
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from graphengine.bench.report import print_report
from graphengine.data.row_file import direct_alignment
from graphengine.ops.backend import require_extension
from graphengine.ops.read_rows import ENGINES, io_uring_probe, read_rows

#: (reads in flight, bytes a read): a page at 1 and at 64 in flight, and a feature row's size.
PATTERNS = ((1, 4096), (64, 4096), (64, 512))
_CHUNK = 64 * 2**20


def run(path: Path | None, size: int, seconds: float) -> dict:
    """Time random reads of a ``size``-byte scratch file (written at ``path``, kept there;
    else a temporary file, removed after) for ``seconds`` per engine, mode and pattern.

    IOPS counts the read requests the op issued; O_DIRECT reads miss the page cache, buffered
    ones start from a dropped cache (``POSIX_FADV_DONTNEED``) but hit pages read earlier in
    the same run.
    """
    require_extension("graphengine bench disk")
    scratch = path if path is not None else _temporary_path()
    try:
        _write_scratch(scratch, size)
        results = [
            _measure(scratch, engine, direct, depth, row_bytes, seconds)
            for engine in _engines()
            for direct in (True, False)
            for depth, row_bytes in PATTERNS
        ]
    finally:
        if path is None:
            scratch.unlink(missing_ok=True)
    rows = [
        [
            r["engine"],
            "O_DIRECT" if r["direct"] else "buffered",
            r["in_flight"],
            r["row_bytes"],
            r["iops"],
            r["mb_per_s"],
        ]
        for r in results
        if "iops" in r
    ]
    summary = {
        "bench": "disk",
        "path": str(scratch),
        "size": size,
        "seconds": seconds,
        "results": results,
        "fastest_at_64": _fastest(results),
    }
    print_report(["engine", "mode", "in flight", "bytes", "IOPS", "MB/s"], rows, summary)
    return summary


def _engines() -> tuple[str, ...]:
    return ENGINES if not io_uring_probe() else ("pread",)


def _temporary_path() -> Path:
    handle, name = tempfile.mkstemp(prefix="graphengine-bench-disk-", suffix=".bin")
    os.close(handle)
    return Path(name)


def _write_scratch(path: Path, size: int) -> None:
    """Fill ``path`` with ``size`` bytes of noise, unless it already holds at least that many."""
    if path.exists() and path.stat().st_size >= size:
        return
    noise = np.random.default_rng(0).integers(0, 256, _CHUNK, dtype=np.uint8).tobytes()
    with open(path, "wb") as file:
        for start in range(0, size, _CHUNK):
            file.write(noise[: min(_CHUNK, size - start)])
        file.flush()
        os.fsync(file.fileno())


def _measure(path: Path, engine: str, direct: bool, depth: int, row_bytes: int, seconds: float):
    result = {"engine": engine, "direct": direct, "in_flight": depth, "row_bytes": row_bytes}
    try:
        fd = os.open(path, os.O_RDONLY | (os.O_DIRECT if direct else 0))
    except OSError as error:
        if error.errno != errno.EINVAL:
            raise
        return {**result, "skipped": "the filesystem refuses O_DIRECT"}
    try:
        if not direct:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        align = direct_alignment(fd) if direct else 0
        num_rows = os.fstat(fd).st_size // row_bytes
        batch = 16 * depth  # enough ids that the queue stays full between refills
        generator = torch.Generator().manual_seed(depth * row_bytes)
        out = torch.empty(batch, row_bytes, dtype=torch.uint8)
        reads = nbytes = 0
        start = time.perf_counter()
        while (elapsed := time.perf_counter() - start) < seconds:
            ids = torch.randint(0, num_rows, (batch,), generator=generator)
            counts = read_rows(
                fd,
                ids,
                out,
                offset=0,
                row_bytes=row_bytes,
                num_rows=num_rows,
                engine=engine,
                queue_depth=depth,
                align=align,
            )
            reads += counts["reads"]
            nbytes += counts["bytes"]
    finally:
        os.close(fd)
    return {**result, "iops": round(reads / elapsed), "mb_per_s": round(nbytes / elapsed / 1e6, 1)}


def _fastest(results: list[dict]) -> dict:
    """Per mode, the engine with the most IOPS for 4 KiB reads at 64 in flight, and by how
    much (its IOPS over the other's)."""
    fastest = {}
    for direct in (True, False):
        deep = [
            r
            for r in results
            if r["direct"] == direct and r["in_flight"] == 64 and r["row_bytes"] == 4096
            if "iops" in r
        ]
        if not deep:
            continue
        deep.sort(key=lambda r: -r["iops"])
        ratio = deep[0]["iops"] / deep[1]["iops"] if len(deep) > 1 and deep[1]["iops"] else None
        mode = "direct" if direct else "buffered"
        fastest[mode] = {"engine": deep[0]["engine"], "ratio": ratio and round(ratio, 3)}
    return fastest
