"""``graphengine bench scaling``: the sampling cost per edge as the graph grows."""

from __future__ import annotations

from . import options, values


def add_parser(benches) -> None:
    scaling = options.add_command(benches, "scaling", "sampling cost per edge as the graph grows")
    scaling.add_argument(
        "--log2-nodes",
        type=values.ints,
        default=[16, 18, 20, 22],
        help="graph sizes, as log2(nodes)",
    )
    options.add_fanouts(scaling)
    options.add_batch_size(scaling)
    options.add_timed_batches(scaling, default=20)
    options.add_threads(scaling)
    scaling.set_defaults(run=run)


def run(args) -> int:
    from graphengine.bench import scaling

    scaling.run(args.log2_nodes, args.fanouts, args.batch_size, args.batches, args.threads)
    return 0
