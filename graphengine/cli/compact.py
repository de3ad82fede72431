"""``graphengine compact``: a copy of a store with fewer bytes a row (float16 features)."""

from __future__ import annotations

import time
from pathlib import Path

from graphengine.data.format import FEATURE_DTYPES

from .options import add_command


def add_parser(commands) -> None:
    compact = add_command(
        commands,
        "compact",
        "copy a store with its features as float16 (half the bytes a row)",
        description="Copy the store SRC (a folder with dataset.json, homogeneous or "
        "heterogeneous) into the new folder --out with its feature tables converted to "
        "--feature-dtype and an int64 graph 'indices' stored as int32 where the node count "
        "fits, streaming (bounded memory); the manifests are written last, so an interrupted "
        "run leaves no store that opens. A feature value beyond float16's range (magnitude "
        "above 65504) is refused, naming its row and column. Loaders hand float16 rows to the "
        "model as float32.",
    )
    compact.add_argument("source", metavar="SRC", help="the store's folder")
    compact.add_argument("--out", required=True, help="the new store's folder (must not exist)")
    compact.add_argument(
        "--feature-dtype",
        choices=FEATURE_DTYPES,
        default="float16",
        help="the feature tables' dtype in the copy",
    )
    compact.add_argument(
        "--link",
        action="store_true",
        help="hard-link the arrays that do not change instead of copying them (the stores "
        "then share those files)",
    )
    compact.set_defaults(run=run)


def run(args) -> int:
    from graphengine.bench.report import print_report
    from graphengine.datasets.compact import compact_store

    start = time.perf_counter()
    report = compact_store(Path(args.source), Path(args.out), args.feature_dtype, args.link)
    seconds = time.perf_counter() - start
    converted = ", ".join(f"{name} {change}" for name, change in report.converted.items())
    rows = [
        [
            str(args.out),
            f"{report.source_bytes / 1e9:.3f}",
            f"{report.out_bytes / 1e9:.3f}",
            f"{seconds:.1f}",
            converted or "nothing",
        ]
    ]
    summary = {
        "source": str(args.source),
        "out": str(args.out),
        "source_bytes": report.source_bytes,
        "out_bytes": report.out_bytes,
        "converted": report.converted,
        "linked": report.linked,
        "seconds": seconds,
    }
    print_report(["store", "source GB", "out GB", "seconds", "converted"], rows, summary)
    return 0
