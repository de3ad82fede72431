"""``graphengine bench partition``: partitioning's cost, the traffic between parts and the
remote-row caches' hit rates."""

from __future__ import annotations

from graphengine.data.partition import METHODS

from . import options, values


def add_parser(benches) -> None:
    part = options.add_command(
        benches, "partition", "partitioning: its cost, cross-part traffic and cache hit rates"
    )
    options.add_dataset(part, default=options.BENCH_DATASET)
    part.add_argument("--parts", type=values.ints, default=[2, 4], help="K measured (processes)")
    part.add_argument(
        "--methods",
        type=options.choices_of(METHODS),
        default=["metis", "random"],
        help="partitioning methods",
    )
    options.add_fanouts(part)
    options.add_batch_size(part, help="the global batch, split over K")
    options.add_timed_batches(part, default=10)
    part.add_argument(
        "--cache",
        type=values.cache_sizes,
        default=["0", "5%", "20%"],
        help="remote-row cache sizes, comma-separated (rows, N%% of the remote rows, or bytes)",
    )
    part.add_argument(
        "--simulate", type=values.ints, default=[8, 16, 32, 64], help="K simulated (no processes)"
    )
    part.add_argument(
        "--simulated-batches",
        type=values.at_least(1),
        default=200,
        help="global batches simulated",
    )
    part.set_defaults(run=run)


def run(args) -> int:
    from graphengine.bench import partition

    partition.run(
        args.dataset,
        args.root,
        args.parts,
        args.methods,
        args.fanouts,
        args.batch_size,
        args.batches,
        [str(size) for size in args.cache],
        args.simulate,
        args.simulated_batches,
    )
    return 0
