"""``graphengine generate``: write a synthetic dataset to the data root without training."""

from __future__ import annotations

import time
from pathlib import Path

from graphengine.data.format import FEATURE_DTYPES
from graphengine.datasets import CATALOG

from . import options
from .options import add_command, add_root
from .output import report_store


def add_parser(commands) -> None:
    generate = add_command(
        commands,
        "generate",
        "write a synthetic dataset to the data root without training",
        description="Generate a synthetic catalog dataset (synthetic-papers straight to disk, "
        "in chunks) and print where it is, its size, the seconds and the peak memory taken.",
    )
    generate.add_argument("dataset", help="a synthetic catalog name")
    add_root(generate)
    options.add_scale(generate, help="synthetic-papers: 2^S nodes")
    add_feature_dtype(generate)
    generate.set_defaults(run=run)


def add_feature_dtype(command) -> None:
    """``--feature-dtype``: the dtype a written store's feature tables hold."""
    command.add_argument(
        "--feature-dtype",
        choices=FEATURE_DTYPES,
        default=None,
        help="the feature tables' dtype: float16 halves the bytes a row (loaders hand the "
        "rows to the model as float32); a store already there of another dtype is refused "
        "(default: float32, or the store's own)",
    )


def run(args) -> int:
    from graphengine.datasets import default_root, is_heterogeneous
    from graphengine.datasets.catalog import SYNTHETIC, generate_store, papers_scale
    from graphengine.datasets.papers import store_name

    root = Path(args.root) if args.root else default_root()
    scale = papers_scale(args.dataset)
    if scale is None and args.dataset not in SYNTHETIC and not is_heterogeneous(args.dataset):
        synthetic = [n for n, e in CATALOG.items() if e.kind.startswith("synthetic")]
        raise ValueError(f"generate makes a synthetic dataset ({synthetic}); got {args.dataset!r}")
    start = time.perf_counter()
    dataset = generate_store(args.dataset, root, scale, args.feature_dtype)
    path = root / (store_name(scale) if scale is not None else args.dataset)
    report_store(args.dataset, path, dataset, time.perf_counter() - start)
    return 0
