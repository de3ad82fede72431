"""``graphengine bench convert``: ``graphengine convert`` on OGB-format files of products
size, written first."""

from __future__ import annotations

from pathlib import Path

from . import options, values


def add_parser(benches) -> None:
    convert = options.add_command(
        benches, "convert", "graphengine convert on OGB-format files of products size"
    )
    convert.add_argument(
        "--root", help="where the OGB-format files go (default: <data root>/bench-ogb)"
    )
    convert.add_argument("--nodes", type=values.at_least(1), default=2_449_029, help="nodes")
    convert.add_argument("--edges", type=values.at_least(0), default=61_859_140, help="edges")
    convert.add_argument("--features", type=values.at_least(1), default=100, help="features")
    convert.set_defaults(run=run)


def run(args) -> int:
    from graphengine.bench import convert
    from graphengine.datasets import default_root

    root = Path(args.root) if args.root else default_root() / "bench-ogb"
    convert.run(root, args.nodes, args.edges, args.features)
    return 0
