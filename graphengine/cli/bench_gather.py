"""``graphengine bench gather``: feature-row gathers against the copy bandwidth."""

from __future__ import annotations

from . import options, values


def add_parser(benches) -> None:
    gather = options.add_command(benches, "gather", "feature-row gathers vs copy bandwidth")
    gather.add_argument("--table-mib", type=values.at_least(1), default=1024, help="table size")
    gather.add_argument("--cols", type=values.at_least(1), default=128, help="float32 columns")
    gather.add_argument("--ids", type=values.at_least(1), default=200_000, help="rows per gather")
    gather.add_argument("--repeats", type=values.at_least(1), default=10, help="gathers timed")
    options.add_threads(gather, help="gather threads")
    gather.set_defaults(run=run)


def run(args) -> int:
    from graphengine.bench import gather

    gather.run(args.table_mib, args.cols, args.ids, args.repeats, args.threads)
    return 0
