"""``graphengine reorder``: a dataset renumbered for locality on disk (hot nodes first)."""

from __future__ import annotations

import time
from pathlib import Path

from graphengine.datasets.reorder import ORDERS

from .options import add_command, add_dataset
from .output import report_store


def add_parser(commands) -> None:
    reorder = add_command(
        commands,
        "reorder",
        "write a dataset renumbered for locality on disk (hot nodes first)",
        description="Write --dataset renumbered by --order into --out (a store that --dataset "
        "OUT opens, memory-mapped, with order.npy: the original id of each node), streaming; "
        "print the seconds and peak memory.",
    )
    add_dataset(reorder)
    reorder.add_argument("--out", required=True, help="the new store's folder")
    reorder.add_argument(
        "--order", choices=ORDERS, default="degree", help="in-degree, highest first"
    )
    reorder.set_defaults(run=run)


def run(args) -> int:
    from graphengine.datasets import load_dataset
    from graphengine.datasets.reorder import reorder_dataset

    out = Path(args.out)
    if out.exists():
        raise ValueError(f"'{out}' exists; remove it or pick another --out")
    start = time.perf_counter()
    dataset = reorder_dataset(load_dataset(args.dataset, root=args.root), out, args.order, True)
    report_store(str(out), out, dataset, time.perf_counter() - start)
    return 0
