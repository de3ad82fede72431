"""``graphengine bench modes``: weighted, temporal, heterogeneous and LABOR sampling, against
DGL's (and PyG's, where its backend samples the mode)."""

from __future__ import annotations

from . import options


def add_parser(benches) -> None:
    modes = options.add_command(
        benches, "modes", "weighted, temporal, heterogeneous and LABOR sampling, vs DGL"
    )
    options.add_dataset(modes, default=options.BENCH_DATASET)
    options.add_fanouts(modes)
    options.add_batch_size(modes)
    options.add_timed_batches(modes, default=20)
    options.add_threads(modes)
    options.add_peers(
        modes,
        help=f"also time DGL 2.1's samplers ({options.DGL_HINT}) and/or PyG's, where its "
        "backend samples the mode",
    )
    modes.set_defaults(run=run)


def run(args) -> int:
    from graphengine.bench import modes

    modes.run(
        args.dataset,
        args.fanouts,
        args.batch_size,
        args.batches,
        args.threads,
        root=args.root,
        vs_dgl="dgl" in args.vs,
        vs_pyg="pyg" in args.vs,
    )
    return 0
