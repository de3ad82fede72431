"""``graphengine partition``: split a dataset into K parts, each owning a range of node ids."""

from __future__ import annotations

from graphengine.data.partition import METHODS

from . import values
from .options import add_command, add_dataset
from .output import print_json


def add_parser(commands) -> None:
    partition = add_command(
        commands,
        "partition",
        "split a dataset into K parts (METIS or random), each owning a range of node ids",
    )
    add_dataset(partition)
    partition.add_argument("--parts", type=values.at_least(1), required=True, help="K, the parts")
    partition.add_argument("--out", required=True, help="the partition's directory")
    partition.add_argument(
        "--method",
        choices=METHODS,
        default="metis",
        help="metis: few cut edges, balanced nodes/training nodes/edges (needs ~3.3 GB for "
        "2^20 nodes, 24M edges); random: little memory beyond the graph, most edges cut",
    )
    partition.add_argument("--seed", type=values.seed, default=0, help="seed of the random method")
    partition.add_argument(
        "--force", action="store_true", help="replace a partition already in --out"
    )
    partition.set_defaults(run=run)


def run(args) -> int:
    from graphengine.data.partition import partition_dataset
    from graphengine.datasets import load_dataset

    from .paths import check_output_directory

    check_output_directory("--out", args.out)  # before the dataset is opened and split
    stats = partition_dataset(
        load_dataset(args.dataset, root=args.root),
        args.parts,
        args.out,
        method=args.method,
        force=args.force,
        seed=args.seed,
    )
    print_json({"dataset": args.dataset, "method": args.method, **stats})
    return 0
