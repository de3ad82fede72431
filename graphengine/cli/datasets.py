"""``graphengine datasets``: the catalog, what is on disk and the .npz files in the root."""

from __future__ import annotations

from pathlib import Path

from graphengine.datasets import CATALOG

from .options import add_command, add_root


def add_parser(commands) -> None:
    datasets = add_command(
        commands,
        "datasets",
        "list the catalog, what is on disk and the .npz files in the root",
        description="List every dataset of the catalog with its description and whether it is "
        "on disk under the data root (--root, else $GRAPHENGINE_DATA, else the clone's "
        "datasets/ folder, else ~/.cache/graphengine/datasets), then the gnn-benchmark .npz "
        "files found there. Prints a table, then one JSON line.",
    )
    add_root(datasets)
    datasets.set_defaults(run=run)


def run(args) -> int:
    from graphengine.bench.report import print_report
    from graphengine.datasets import default_root, is_available

    root = Path(args.root) if args.root else default_root()
    rows = [
        [name, entry.kind, "yes" if is_available(name, root) else "no", entry.description]
        for name, entry in CATALOG.items()
    ]
    known = {entry.location(root) for entry in CATALOG.values()}
    files = sorted(p for p in root.glob("*.npz") if p not in known) if root.is_dir() else []
    rows += [[str(p), "npz file", "yes", "load with --dataset PATH"] for p in files]
    papers = sorted(p.name for p in root.glob("synthetic-papers-s*")) if root.is_dir() else []
    rows += [[name, "synthetic-papers", "yes", "--dataset " + name] for name in papers]
    summary = {
        "root": str(root),
        "on_disk": [r[0] for r in rows if r[2] == "yes" and r[1] != "npz file"],
        "npz_files": [str(p) for p in files],
    }
    print_report(["name", "kind", "on disk", "description"], rows, summary)
    return 0
