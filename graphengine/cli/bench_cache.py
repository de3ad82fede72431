"""``graphengine bench cache``: host row cache policies (static in-degree, SIEVE, LRU) replayed
on the node ids batches gather."""

from __future__ import annotations

from . import options, values


def add_parser(benches) -> None:
    cache = options.add_command(
        benches, "cache", "host row cache policies: hit rates on the rows batches gather"
    )
    options.add_dataset(cache, default="synthetic-papers")
    options.add_fanouts(cache)
    options.add_batch_size(cache)
    options.add_timed_batches(cache, default=200, help="batches replayed")
    cache.add_argument(
        "--sizes",
        type=values.cache_sizes,
        default=["5%", "10%", "20%", "40%"],
        help="cache sizes, comma-separated (rows, N%% of the nodes, or bytes of feature rows)",
    )
    cache.set_defaults(run=run)


def run(args) -> int:
    from graphengine.bench import cache_policy

    cache_policy.run(
        args.dataset, args.root, args.fanouts, args.batch_size, args.batches, args.sizes
    )
    return 0
