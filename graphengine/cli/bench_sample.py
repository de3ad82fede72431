"""``graphengine bench sample``: the node, link, Cluster-GCN and GraphSAINT loaders, against
PyG's and DGL's."""

from __future__ import annotations

from . import options, values
from .output import figure_written
from .paths import check_figure_file

LOADERS = ["node", "link", "cluster", "saint"]


def add_parser(benches) -> None:
    sample = options.add_command(
        benches, "sample", "the node, link, Cluster-GCN and GraphSAINT loaders, vs PyG, DGL"
    )
    options.add_dataset(sample, default=options.BENCH_DATASET)
    sample.add_argument(
        "--loader",
        choices=LOADERS,
        default="node",
        help="NeighborLoader; LinkNeighborLoader (binary negatives, one per seed edge); "
        "ClusterData + ClusterLoader (METIS time reported apart); GraphSAINT's samplers",
    )
    options.add_fanouts(sample, help=f"{options.FANOUTS_HELP} (node, link)")
    options.add_batch_size(
        sample,
        help="seeds per batch: nodes (node), seed edges (link), walk roots or node/edge draws "
        "(saint)",
    )
    options.add_timed_batches(sample, default=20)
    options.add_threads(sample)
    sample.add_argument(
        "--parts", type=values.at_least(1), default=1500, help="METIS clusters (cluster)"
    )
    options.add_clusters_per_batch(sample, help="clusters per batch (cluster)", default=20)
    sample.add_argument(
        "--saint-mode",
        choices=["walk", "node", "edge"],
        default="walk",
        help="GraphSAINT's random-walk, node or edge sampler (saint)",
    )
    options.add_walk_length(sample, help="steps per walk (saint, walk)", default=2, shortest=0)
    sample.add_argument(
        "--device",
        default="cpu",
        help="node: also time sampling on this GPU (e.g. cuda): the sampler alone, and the "
        "NeighborLoader with batches on it, sampled there and on the CPU",
    )
    options.add_peers(
        sample,
        help="also time PyG's namesake loaders, where its backend runs them, and/or DGL 2.1's "
        f"({options.DGL_HINT}); a peer that cannot run gets a row saying why",
    )
    options.add_plot(
        sample,
        help="also draw each loader's throughput, a bar per row: seeds and edges per second "
        "(node); batches and edges per second (link, cluster, saint), and seed edges per "
        "second (link)",
    )
    sample.set_defaults(run=run)


def run(args) -> int:
    if args.plot is not None:
        check_figure_file("--plot", args.plot)
    if args.loader == "node":
        from graphengine.bench import sample

        sample.run(
            args.dataset,
            args.fanouts,
            args.batch_size,
            args.batches,
            args.threads,
            root=args.root,
            vs=args.vs,
            device=args.device,
            plot=args.plot,
        )
        figure_written(args.plot)
        return 0
    if args.device != "cpu":
        raise ValueError(f"--device {args.device} is for --loader node (got {args.loader})")
    from graphengine.bench import loaders

    loaders.run(
        args.loader,
        args.dataset,
        args.fanouts,
        args.batch_size,
        args.batches,
        args.threads,
        root=args.root,
        vs=args.vs,
        parts=args.parts,
        clusters_per_batch=args.clusters_per_batch,
        walk_length=args.walk_length,
        saint_mode=args.saint_mode,
        plot=args.plot,
    )
    figure_written(args.plot)
    return 0
