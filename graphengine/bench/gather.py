"""``graphengine bench gather``: feature-row gathers against the machine's copy bandwidth."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch

from graphengine import ops
from graphengine.bench.report import print_report
from graphengine.bench.sample import set_threads
from graphengine.runtime import host_memory_cache


def run(table_mib: int, cols: int, ids: int, repeats: int, threads: int) -> dict:
    """Gather ``ids`` random rows of a ``table_mib`` MiB float32 table of ``cols`` columns.

    GB/s counts the bytes read plus written. CPU rows: a large tensor copy (the
    bandwidth ceiling), ``torch.index_select`` into a buffer and allocating its result
    (what PyG's loader does), and graphengine's gather both ways. With CUDA, also the
    host-to-device copy, zero-copy, cached (100% hits) and device-resident gathers.
    """
    set_threads(threads)
    if not ops.build_extension():
        raise RuntimeError("the graphengine extension did not build; see the warning above")
    rows = table_mib * 2**20 // (4 * cols)
    generator = torch.Generator().manual_seed(0)
    src = torch.rand(rows, cols, generator=generator)
    index = torch.randint(0, rows, (ids,), generator=generator)
    gathered_bytes = 2 * ids * cols * 4
    out = torch.empty(ids, cols)
    big = torch.empty(rows // 2, cols)
    half = src[: rows // 2]
    # As a loader pass calls it: its outputs come from the host cache (graphengine.runtime).
    with host_memory_cache():
        pooled = _time(lambda: ops.gather_rows(src, index), repeats)

    timings = {
        "copy (tensor.copy_)": (_time(lambda: big.copy_(half), repeats), 2 * big.nbytes),
        "torch.index_select(out=)": (
            _time(lambda: torch.index_select(src, 0, index, out=out), repeats),
            gathered_bytes,
        ),
        "torch.index_select": (
            _time(lambda: torch.index_select(src, 0, index), repeats),
            gathered_bytes,
        ),
        "graphengine gather_rows(out=)": (
            _time(lambda: ops.gather_rows(src, index, out), repeats),
            gathered_bytes,
        ),
        "graphengine gather_rows": (pooled, gathered_bytes),
    }
    if torch.cuda.is_available():
        timings.update(_cuda_timings(src, index, repeats, gathered_bytes))
    rates = {name: nbytes / seconds / 1e9 for name, (seconds, nbytes) in timings.items()}
    copy = rates["copy (tensor.copy_)"]
    rows_out = [
        [name, seconds * 1e3, rates[name], rates[name] / copy]
        for name, (seconds, _) in timings.items()
    ]
    summary = {
        "bench": "gather",
        "table_mib": table_mib,
        "cols": cols,
        "ids": ids,
        "threads": threads,
        "gb_per_s": {name: round(rate, 3) for name, rate in rates.items()},
        "gather_vs_copy": rates["graphengine gather_rows(out=)"] / copy,
        "gather_vs_index_select_out": rates["graphengine gather_rows(out=)"]
        / rates["torch.index_select(out=)"],
        "gather_vs_index_select": rates["graphengine gather_rows"] / rates["torch.index_select"],
    }
    print_report(["operation", "ms (median)", "GB/s", "of copy"], rows_out, summary)
    return summary


def _cuda_timings(src, index, repeats, gathered_bytes) -> dict:
    device_src = src.cuda()
    pinned = src.pin_memory()
    cuda_index = index.cuda()
    out = torch.empty(index.numel(), src.shape[1], device="cuda")
    slot_of = torch.arange(src.shape[0], dtype=torch.int32, device="cuda")
    host = torch.empty(64 * 2**20 // 4).pin_memory()
    device = torch.empty_like(host, device="cuda")

    def synced(function):
        def call():
            function()
            torch.cuda.synchronize()

        return call

    return {
        "cuda: host-to-device copy (pinned)": (
            _time(synced(lambda: device.copy_(host, non_blocking=True)), repeats),
            host.nbytes,
        ),
        "cuda: device copy": (
            _time(synced(lambda: out.copy_(device_src[: out.shape[0]])), repeats),
            2 * out.nbytes,
        ),
        "cuda: gather_rows zero-copy": (
            _time(synced(lambda: ops.gather_rows(pinned, cuda_index, out)), repeats),
            gathered_bytes // 2,
        ),
        "cuda: cached_gather 100% hits": (
            _time(
                synced(lambda: ops.cached_gather(pinned, cuda_index, device_src, slot_of, out)),
                repeats,
            ),
            gathered_bytes,
        ),
        "cuda: gather_rows on device": (
            _time(synced(lambda: ops.gather_rows(device_src, cuda_index, out)), repeats),
            gathered_bytes,
        ),
    }


def _time(function: Callable[[], object], repeats: int) -> float:
    """Median seconds of ``repeats`` calls after one warm-up call."""
    function()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)
