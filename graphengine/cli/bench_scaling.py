"""``graphengine bench scaling``: the sampling cost per edge as the graph grows, against PyG's
and DGL's loaders."""

from __future__ import annotations

from . import options, values
from .output import figure_written
from .paths import check_figure_file


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
    options.add_peers(
        scaling,
        help="also time PyG's NeighborLoader and/or DGL 2.1's DataLoader with its "
        f"NeighborSampler on each graph, over the graph alone ({options.DGL_HINT}); a peer "
        "that cannot run gets a row saying why",
    )
    options.add_plot(
        scaling, help="also draw ns per sampled edge against the graph's nodes, a line per library"
    )
    scaling.set_defaults(run=run)


def run(args) -> int:
    if args.plot is not None:
        check_figure_file("--plot", args.plot)
    from graphengine.bench import scaling

    scaling.run(
        args.log2_nodes,
        args.fanouts,
        args.batch_size,
        args.batches,
        args.threads,
        vs=args.vs,
        plot=args.plot,
    )
    figure_written(args.plot)
    return 0
