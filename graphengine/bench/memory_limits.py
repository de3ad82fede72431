"""``graphengine bench train --memory-limits``: training steps from a store read from disk,
under memory limits smaller than the store.

For each limit, graphengine's single-process train bench (the process of
:mod:`graphengine.bench.train`, as its CLI runs it: a warm-up step, then ``batches`` timed)
runs in a fresh child process that starts cold (the page cache dropped: ``sync`` and
``echo 3 > /proc/sys/vm/drop_caches``), inside a cgroup v1 memory group limited to it
(:mod:`graphengine.bench.cgroup`); ``none`` runs it with no group. A limit is bytes
(``4GiB``, ``1.5GB``) or a share of the store's size on disk (``40%``). Per limit: seconds a
step, the loader's sample and gather seconds and the compute a step, MB read from disk and
major page faults a step, the child's peak RSS, the group's peak usage and the OOM kills (and,
in the JSON line, how often it hit the limit). Where the features are read from disk through a
row cache (:mod:`graphengine.data.disk_table`): the cache's hit rate, the rows read from disk a
step and the reads a second while gathers waited for them (against ``graphengine bench disk``'s
figures). A child the OOM killer ended, or one that
failed otherwise, is a row saying so.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from graphengine.bench import cgroup
from graphengine.bench.report import print_report
from graphengine.bench.train import check_timed_steps
from graphengine.data.sizes import BYTE_UNITS, parse_size
from graphengine.datasets import load_dataset
from graphengine.datasets.dataset import DEFAULT_CACHE_POLICY

log = logging.getLogger(__name__)

NO_LIMIT = "none"
#: No limit, the store read into the page cache before the run and its features read through
#: the memory maps: the in-memory step every limit is compared with.
IN_MEMORY = "in-memory"
# A memory group's limit is at least a page.
MIN_LIMIT_BYTES = 4096
# The loader's stages and the compute, seconds a step, in the order the figure stacks them.
PHASES = ("sample", "gather", "compute")


@dataclass(frozen=True)
class MemoryLimit:
    """One limit of ``--memory-limits``: its text and, once the store's size is known, its
    bytes (``None``: no limit)."""

    text: str
    bytes: int | None


def parse_limit(text: str) -> str:
    """Check one limit's text: ``none``, ``in-memory`` (:data:`IN_MEMORY`), a share of the
    store (``40%``, above 0) or bytes with a unit (``4GiB``, ``1.5GB``, ``4096B``); returns it
    stripped.

    Raises:
        ValueError: any other text.
    """
    text = text.strip()
    if text.lower() in (NO_LIMIT, IN_MEMORY):
        return text.lower()
    parsed = parse_size(text)
    if parsed is None or parsed[1] == "" or not parsed[0] > 0:
        raise ValueError(
            f"expected 'none', 'in-memory', a share of the store above 0 (40%) or bytes "
            f"with a unit (4GiB, 1.5GB) (got {text!r})"
        )
    return text


def resolve_limit(text: str, store_bytes: int) -> MemoryLimit:
    """The bytes of a limit checked by :func:`parse_limit`: a share of ``store_bytes``, or
    its own.

    Raises:
        ValueError: a limit below a page (:data:`MIN_LIMIT_BYTES`), naming it.
    """
    if text in (NO_LIMIT, IN_MEMORY):
        return MemoryLimit(text, None)
    value, unit = parse_size(text)
    limit = int(store_bytes * value / 100) if unit == "%" else int(value * BYTE_UNITS[unit])
    if limit < MIN_LIMIT_BYTES:
        raise ValueError(
            f"memory limit {text!r} is {limit} bytes: a memory group takes at least "
            f"{MIN_LIMIT_BYTES} (a page)"
        )
    return MemoryLimit(text, limit)


def store_size(dataset) -> tuple[Path, int]:
    """The folder of a store opened memory-mapped, and the bytes of all files under it.

    Raises:
        ValueError: the dataset is held in memory, not read from a store's files.
    """
    filename = getattr(dataset.x, "filename", None)
    if filename is None:
        raise ValueError(
            f"memory limits need a store read from disk; {dataset.name!r} is held in memory"
        )
    folder = Path(filename).parent
    return folder, sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def unavailable(limits: list[str]) -> str | None:
    """Why ``limits`` cannot run here, or ``None``: every run needs root (it drops the page
    cache), every limit but ``none`` a memory group (:func:`.cgroup.unavailable`)."""
    if any(text not in (NO_LIMIT, IN_MEMORY) for text in limits):
        missing = cgroup.unavailable()
        if missing is not None:
            return missing
    if os.geteuid() != 0:
        return "memory limits need root: each run starts with the page cache dropped"
    return None


def run(
    limits: list[str],
    config: dict,
    timeout_s: float | None = None,
) -> dict:
    """Time the train bench's graphengine process once per limit (module docstring); print
    a table and a JSON line.

    Args:
        limits: texts :func:`parse_limit` accepts, run in this order.
        config: the process's configuration (:func:`graphengine.bench.train.process`'s:
            ``dataset``, ``root``, ``fanouts``, ``batch_size``, ``hidden``, ``batches``,
            ``threads``, ``access``, ...); its ``library`` is set to ``"graphengine"``.
        timeout_s: seconds a child may run before it is killed (and its row failed).

    Returns:
        The summary: ``bench`` (``"train-memory-limits"``), the dataset, ``store_bytes``,
        the step's shape, and ``rows``: per limit ``limit``, ``limit_bytes`` (``None``:
        none), ``step_s``, ``stage_s`` (per step, keys of :data:`PHASES`), ``read_mb``,
        ``major_faults`` (per step), ``peak_rss_gb``, ``cgroup_peak_bytes``, ``limit_hits``,
        ``oom_kills`` (``None`` without a group) and ``error`` (``None``, or why the child
        gave no steps).

    Raises:
        RuntimeError: a limit other than ``none`` where memory groups cannot be made.
        ValueError: more timed batches than an epoch has, or a limit below a page.
    """
    missing = unavailable(limits)
    if missing is not None:
        raise RuntimeError(missing)
    dataset = load_dataset(config["dataset"], root=config["root"])  # generated here once
    check_timed_steps(dataset, config["batch_size"], config["batches"])
    folder, store_bytes = store_size(dataset)
    del dataset  # its maps would keep their pages from being dropped
    log.info("the store %s takes %.2f GB", folder, store_bytes / 1e9)
    config = {**config, "library": "graphengine", "epochs": 0, "profile": 0}
    in_memory = {**config, "feature_reads": "mmap"}
    rows = []
    for limit in [resolve_limit(text, store_bytes) for text in limits]:  # all before any run
        log.info("limit %s (%s bytes)", limit.text, limit.bytes)
        drop_page_cache()
        if limit.text == IN_MEMORY:
            read_into_page_cache(folder)
        chosen = in_memory if limit.text == IN_MEMORY else config
        command = [sys.executable, "-m", "graphengine.bench.train", json.dumps(chosen)]
        rows.append(limited_row(limit, command, timeout_s))
    summary = {
        "bench": "train-memory-limits",
        "dataset": config["dataset"],
        "store_bytes": store_bytes,
        "model": f"{config['model']}-{len(config['fanouts'])}x{config['hidden']}",
        "fanouts": config["fanouts"],
        "batch_size": config["batch_size"],
        "batches": config["batches"],
        "threads": config["threads"],
        "access": config["access"],
        "feature_cache": config["feature_cache"],
        "feature_reads": config.get("feature_reads", "auto"),
        "cache_policy": config.get("cache_policy", DEFAULT_CACHE_POLICY),
        "rows": rows,
    }
    print_table(rows, summary)
    return summary


def limited_row(limit: MemoryLimit, command: list[str], timeout_s: float | None) -> dict:
    """Run ``command`` (the train bench's process, whose last stdout line is its JSON:
    ``step_s``, ``wall``, ``stages``, ``io_per_step``, ``peak_rss_gb``) under ``limit``, in a
    memory group unless it is none: one row of :func:`run`'s ``rows``, its measurements or
    the error that ended the command."""
    row = {"limit": limit.text, "limit_bytes": limit.bytes}
    if limit.bytes is None:
        try:
            done = subprocess.run(
                command, stdout=subprocess.PIPE, text=True, timeout=timeout_s, check=False
            )
            returncode, stdout = done.returncode, done.stdout
        except subprocess.TimeoutExpired:
            returncode, stdout = None, ""
        row |= {"cgroup_peak_bytes": None, "limit_hits": None, "oom_kills": None}
    else:
        ran = cgroup.run_limited(command, limit.bytes, timeout_s=timeout_s)
        returncode, stdout = ran.returncode, ran.stdout
        row |= {
            "cgroup_peak_bytes": ran.peak_bytes,
            "limit_hits": ran.limit_hits,
            "oom_kills": ran.oom_kills,
        }
    return row | _measurements(returncode, stdout, row["oom_kills"], timeout_s)


def _measurements(
    returncode: int | None, stdout: str, oom_kills: int | None, timeout_s: float | None
) -> dict:
    """The child's steps from its last stdout line, or ``error`` and empty measurements."""
    empty = {"step_s": None, "stage_s": {}, "read_mb": None, "major_faults": None}
    empty |= {"peak_rss_gb": None, "disk": None}
    if returncode is None:
        return empty | {"error": f"timed out after {timeout_s:g} s"}
    if returncode != 0:
        if oom_kills:
            return empty | {"error": "killed by the OOM killer"}
        return empty | {"error": f"exited with code {returncode} (its log is above)"}
    try:
        out = json.loads(stdout.splitlines()[-1])
        batches = out["wall"] / out["step_s"]  # the process's step_s is its wall over its steps
        io = out["io_per_step"]
    except (IndexError, ValueError, KeyError, TypeError, ZeroDivisionError):
        return empty | {"error": "exited without its result line (its log is above)"}
    return {
        "step_s": out["step_s"],
        "stage_s": {name: out["stages"][name] / batches for name in PHASES},
        "read_mb": io["read_bytes"] / 1e6 if io["read_bytes"] is not None else None,
        "major_faults": io["major_faults"],
        "peak_rss_gb": out["peak_rss_gb"],
        "disk": _disk_reads(out.get("feature_cache"), batches),
        "error": None,
    }


def _disk_reads(cache: dict | None, batches: float) -> dict | None:
    """The row cache's and the disk's counts over the timed steps (``None`` when the
    features were not read from disk): ``hit_rate``, ``rows_read`` and ``reads`` a step,
    ``iops`` (reads a second while gathers waited for them), ``engine`` and ``direct``."""
    if cache is None or "reads" not in cache:
        return None
    return {
        "hit_rate": cache["hit_rate"],
        "cache_gb": cache["bytes"] / 1e9,
        "rows_read": cache["rows_read"] / batches,
        "reads": cache["reads"] / batches,
        "iops": cache["reads"] / cache["read_s"] if cache["read_s"] else None,
    }


def read_into_page_cache(folder: Path) -> None:
    """Read every file under ``folder`` once, so the page cache holds the store."""
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        with path.open("rb") as file:
            while file.read(1 << 24):
                pass


def drop_page_cache() -> None:
    """Start cold: write back dirty pages, then drop the clean ones from the page cache."""
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("3")


def print_table(rows: list[dict], summary: dict) -> None:
    """One line per limit, then ``summary`` as a JSON line."""
    store_gb = summary["store_bytes"] / 1e9
    table = []
    for row in rows:
        limit = row["limit"]
        if row["limit_bytes"] is not None:
            limit += f" ({row['limit_bytes'] / 1e9:.2f} GB)"
        if row["error"] is not None:
            table.append([limit, row["error"], *[""] * 10, _or_dash(row["oom_kills"])])
            continue
        stages = row["stage_s"]
        peak = row["cgroup_peak_bytes"]
        disk = row["disk"] or {}
        table.append(
            [
                limit,
                row["step_s"],
                stages["sample"],
                stages["gather"],
                stages["compute"],
                _or_dash(row["read_mb"]),
                row["major_faults"],
                _or_dash(disk.get("hit_rate")),
                _or_dash(disk.get("rows_read")),
                _or_dash(disk.get("iops")),
                row["peak_rss_gb"],
                "-" if peak is None else peak / 1e9,
                _or_dash(row["oom_kills"]),
            ]
        )
    sys.stdout.write(f"store: {summary['dataset']}, {store_gb:.2f} GB on disk; each run cold\n")
    headers = ["limit", "s/step", "sample s/step", "gather s/step", "compute s/step"]
    headers += ["MB read/step", "major faults/step", "cache hit rate", "rows read/step"]
    headers += ["read IOPS", "peak RSS GB", "cgroup peak GB"]
    print_report([*headers, "OOM kills"], table, summary)


def _or_dash(value):
    return "-" if value is None else value
