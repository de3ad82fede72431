"""``graphengine convert``: an OGB dataset's files into graphengine's memory-mapped store."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from graphengine.datasets import CATALOG
from graphengine.datasets.ogb import OGB

from .generate import add_feature_dtype
from .options import add_command, add_root
from .output import report_store


def add_parser(commands) -> None:
    convert = add_command(
        commands,
        "convert",
        "convert an OGB dataset's files (as the ogb package lays them out) once",
        description="Convert ogbn-arxiv, ogbn-products or ogbn-papers100M from "
        "<root>/ogbn_<name>/ (raw/ and split/, as the ogb package leaves them) into "
        "graphengine's memory-mapped store <root>/<name>/, streaming (bounded memory); print "
        "the seconds and peak memory.",
    )
    convert.add_argument("dataset", choices=sorted(OGB), help="the OGB dataset")
    add_root(convert)
    convert.add_argument("--force", action="store_true", help="convert again over a store")
    add_feature_dtype(convert)
    convert.set_defaults(run=run)


def run(args) -> int:
    from graphengine.datasets import default_root
    from graphengine.datasets.catalog import load_ogb

    root = Path(args.root) if args.root else default_root()
    store = CATALOG[args.dataset].location(root)
    if store.exists() and not args.force:
        raise ValueError(f"'{store}' exists; pass --force to convert {args.dataset} again")
    if store.exists():
        shutil.rmtree(store)
    start = time.perf_counter()
    dataset = load_ogb(args.dataset, root, progress=True, feature_dtype=args.feature_dtype)
    report_store(args.dataset, store, dataset, time.perf_counter() - start)
    return 0
