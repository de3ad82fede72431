"""``graphengine bench BENCH``: the benchmarks, one module each (``bench_*``); each prints a
table, then one JSON line."""

from __future__ import annotations

from . import (
    bench_cache,
    bench_convert,
    bench_disk,
    bench_gather,
    bench_modes,
    bench_partition,
    bench_plan,
    bench_sample,
    bench_scaling,
    bench_train,
)
from .options import add_command

BENCHES = (
    bench_sample,
    bench_modes,
    bench_train,
    bench_partition,
    bench_convert,
    bench_gather,
    bench_disk,
    bench_scaling,
    bench_plan,
    bench_cache,
)


def add_parser(commands) -> None:
    bench = add_command(commands, "bench", "benchmarks: a table, then one JSON line")
    benches = bench.add_subparsers(dest="bench", required=True, metavar="BENCH")
    for module in BENCHES:
        module.add_parser(benches)
