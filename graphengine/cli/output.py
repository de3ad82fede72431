"""What commands print: JSON lines on stdout (flushed as written) and the report of a
store written to disk; logs go to stderr."""

from __future__ import annotations

import logging
import resource
import sys
from pathlib import Path

log = logging.getLogger("graphengine")


def print_json(record: dict) -> None:
    """``record`` as one line of valid JSON (a non-finite float as ``null``) on stdout,
    flushed so that a reader sees it at once."""
    from graphengine.train.metrics import json_line  # imports torch: not for --help

    sys.stdout.write(json_line(record) + "\n")
    sys.stdout.flush()


def epoch_seconds(history: list[dict]) -> dict:
    """``first_epoch_s`` (it includes compiling the Numba kernels) and ``epoch_s``, the mean
    of the later epochs (of the first when only one ran), of ``history``'s metrics."""
    times = [m["epoch_s"] for m in history]
    later = times[1:] or times
    return {
        "first_epoch_s": times[0] if times else None,
        "epoch_s": sum(later) / len(later) if later else None,
    }


def report_store(name: str, path: Path, dataset, seconds: float) -> None:
    """The table and JSON line of ``generate``, ``convert`` and ``reorder`` (the peak
    resident memory counts the store's pages its final check mapped)."""
    from graphengine.bench.report import print_report

    size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9  # KiB on Linux
    rows = [[name, str(path), f"{size / 1e9:.2f}", f"{seconds:.1f}", f"{peak:.2f}"]]
    summary = {"dataset": name, "path": str(path), "bytes": size, "seconds": seconds}
    summary |= {"peak_rss_gb": peak, "repr": repr(dataset)}
    print_report(["dataset", "path", "GB on disk", "seconds", "peak RSS GB"], rows, summary)


def figure_written(path: str | Path | None) -> None:
    """Log where a figure went (nothing without one: no ``--plot``)."""
    if path is not None:
        log.info("figure written to %s", path)
