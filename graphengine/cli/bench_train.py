"""``graphengine bench train``: end-to-end training steps against PyG's and DGL's loops; with
``--nproc`` data-parallel epochs, with ``--parallel hybrid`` hybrid against data parallelism,
with ``--memory-limits`` graphengine's steps under memory limits; ``--plot`` draws any of them
but ``--nproc``'s epochs."""

from __future__ import annotations

import argparse
import logging

from graphengine.nn.forward import FORWARDS

from . import options, values
from .errors import USAGE
from .output import figure_written
from .paths import check_figure_file

log = logging.getLogger(__name__)

MODELS = ["sage", "gat", "gcn"]


def add_parser(benches) -> None:
    train = options.add_command(
        benches, "train", "end-to-end training steps, vs PyG's and DGL's loops"
    )
    options.add_dataset(train, default=options.BENCH_DATASET)
    options.add_model(
        train,
        MODELS,
        help="the GNN: PyG's GraphSAGE, GAT (4 heads) or GCN, against DGL's SAGEConv, GATConv "
        "or GraphConv",
    )
    options.add_fanouts(train)
    options.add_out_of_core(train)
    _add_step_options(train)
    _add_peer_options(train)
    _add_graphengine_options(train)
    _add_parallel_options(train)
    _add_memory_options(train)
    train.set_defaults(run=run)


def _add_step_options(train: argparse.ArgumentParser) -> None:
    """Which rows run, and the steps each times."""
    train.add_argument(
        "--variants",
        choices=["all", "cli"],
        default="all",
        help="graphengine's rows: as its CLI runs it, as a library user, with the host cache "
        "off (all), or the first only (cli: e.g. a store read from disk)",
    )
    options.add_batch_size(train)
    options.add_hidden(train, default=256)
    options.add_timed_batches(train, default=5, help="steps timed")
    options.add_threads(train, default=2)
    train.add_argument(
        "--epochs", type=values.at_least(0), default=0, help="also train E epochs for accuracy"
    )


def _add_peer_options(train: argparse.ArgumentParser) -> None:
    """The peers, the rounds of fresh processes and how the peers' processes run."""
    options.add_peers(
        train,
        help="also time PyG's NeighborLoader loop and/or DGL 2.1's own (its DataLoader and "
        f"SAGEConv on blocks; {options.DGL_HINT}); a peer that cannot run gets a row saying why",
    )
    train.add_argument(
        "--rounds",
        type=values.at_least(1),
        default=1,
        help="rounds of one fresh process per library, alternating; medians are reported",
    )
    train.add_argument(
        "--tune-peers",
        action="store_true",
        help="run PyG's and DGL's processes with graphengine's allocator tuning too (both "
        "tuned), instead of glibc's defaults (as their users run them)",
    )


def _add_graphengine_options(train: argparse.ArgumentParser) -> None:
    """How graphengine's own steps run: profiled, in bf16, the forward, the device."""
    train.add_argument(
        "--profile",
        type=values.at_least(0),
        default=0,
        metavar="STEPS",
        help="also profile this many of graphengine's steps (compute only, in its first "
        "process): seconds in dense matrix products, aggregation, elementwise passes and the "
        "rest, and the step over its dense products",
    )
    options.add_precision(
        train,
        help="graphengine's training steps in float32 or under autocast to bfloat16 (the peers "
        "run float32)",
    )
    train.add_argument(
        "--forward",
        choices=FORWARDS,
        default="auto",
        help="how graphengine's Trainer runs the model on a batch (auto: blocks)",
    )
    train.add_argument(
        "--device",
        default="cpu",
        help="where the models train (e.g. cuda); graphengine then samples there too, unless "
        "--sample-on cpu",
    )
    train.add_argument(
        "--sample-on",
        choices=["auto", "cpu", "cuda"],
        default="auto",
        help="where graphengine samples (the NeighborLoader's sample_on): auto, on a CUDA "
        "--device where the GPU kernels draw the options, else the CPU",
    )


def _add_parallel_options(train: argparse.ArgumentParser) -> None:
    """Instead of the single-process steps: data-parallel epochs, or hybrid parallelism."""
    options.add_nproc(
        train, help="instead: epochs of graphengine train with 1..N data-parallel workers"
    )
    options.add_parallel(
        train,
        help="hybrid (with --nproc N >= 2): --parallel hybrid against --parallel data for each "
        "of --widths and --hiddens, with a projection to 8 and 16 workers",
    )
    train.add_argument(
        "--widths",
        type=values.ints,
        default=[100, 512, 1024],
        help="with --parallel hybrid: feature widths (synthetic datasets generated as NAME-xF)",
    )
    train.add_argument(
        "--hiddens",
        type=values.ints,
        default=[64, 256],
        help="with --parallel hybrid: hidden widths",
    )
    train.add_argument(
        "--steps",
        type=values.at_least(1),
        default=20,
        help="with --parallel hybrid: global batches per epoch (one warm-up epoch, one timed)",
    )
    train.add_argument(
        "--link-gbps",
        type=values.positive_float,
        default=10.0,
        help="with --parallel hybrid: the network link the projection assumes, Gb/s",
    )


def _add_memory_options(train: argparse.ArgumentParser) -> None:
    """Instead of the peers' comparison: graphengine's steps under memory limits; and the
    figure of whichever mode runs."""
    train.add_argument(
        "--memory-limits",
        type=values.memory_limits,
        metavar="LIMITS",
        help="instead: graphengine's steps (as --variants cli) once per limit, each in a fresh "
        "process started cold (page cache dropped) in a cgroup v1 memory group of that size "
        "(root): shares of the store on disk (40%%), bytes (4GiB), none (no group) or "
        "in-memory (no group, the store read into the page cache first and its features read "
        "by memory map: the step the others are compared with), e.g. in-memory,100%%,40%%,20%%; "
        "a run the OOM killer ends is a row saying so",
    )
    train.add_argument(
        "--run-timeout",
        type=values.positive_float,
        help="with --memory-limits: seconds one run may take before it is killed (and its "
        "row failed); default: no limit",
    )
    options.add_plot(
        train,
        help="also draw the results: seconds a step per library, graphengine's split into its "
        "stages; with --parallel hybrid, seconds a step against the feature width per mode; "
        "with --memory-limits, seconds a step, its phases and the reads against the limit",
    )


def run(args) -> int:
    from graphengine.bench import parallel, train

    if args.plot is not None:
        if args.nproc > 1 and args.parallel != "hybrid":
            raise ValueError(
                "--plot draws the single-process steps, --parallel hybrid or --memory-limits "
                "(not --nproc's data-parallel epochs)"
            )
        check_figure_file("--plot", args.plot)
    if args.run_timeout is not None and args.memory_limits is None:
        raise ValueError("--run-timeout times --memory-limits' runs; give --memory-limits")
    if args.memory_limits is not None:
        return _memory_limits(args)
    if args.parallel == "hybrid":
        if args.nproc < 2:
            raise ValueError(f"--parallel hybrid needs --nproc 2 or more (got {args.nproc})")
        summary = parallel.run(
            args.dataset,
            args.widths,
            args.hiddens,
            args.fanouts,
            args.batch_size,
            args.steps,
            args.nproc,
            root=args.root,
            link_gbps=args.link_gbps,
        )
        if args.plot is not None:
            from graphengine.plot.parallel import plot_parallel_widths

            figure_written(plot_parallel_widths(summary, args.plot))
        return 0
    if args.nproc > 1:
        train.run_workers(
            args.dataset, args.fanouts, args.batch_size, args.hidden, args.nproc, args.root
        )
        return 0
    train.run(
        args.dataset,
        args.fanouts,
        args.batch_size,
        args.hidden,
        args.batches,
        args.threads,
        root=args.root,
        vs=args.vs,
        epochs=args.epochs,
        forward=args.forward,
        device=args.device,
        sample_on=None if args.sample_on == "auto" else args.sample_on,
        rounds=args.rounds,
        tune_peers=args.tune_peers,
        precision=args.precision,
        profile=args.profile,
        model=args.model,
        access=args.access,
        feature_cache=args.feature_cache,
        feature_reads=args.feature_reads,
        cache_policy=args.cache_policy,
        variants=args.variants,
        plot=args.plot,
    )
    figure_written(args.plot)
    return 0


def _memory_limits(args) -> int:
    """``--memory-limits``: graphengine's process of the train bench once per limit."""
    from graphengine.bench import memory_limits

    if args.vs or args.nproc > 1 or args.parallel == "hybrid":
        raise ValueError("--memory-limits runs graphengine alone: no --vs, --nproc or --parallel")
    # One cold run per limit, as its CLI runs it: options of the peers' comparison would be
    # silently dropped.
    taken = {
        "--rounds": args.rounds != 1,
        "--epochs": args.epochs != 0,
        "--profile": args.profile != 0,
        "--tune-peers": args.tune_peers,
    }
    if any(taken.values()):
        given = ", ".join(name for name, used in taken.items() if used)
        raise ValueError(f"--memory-limits runs each limit once, as the CLI runs: not {given}")
    missing = memory_limits.unavailable(args.memory_limits)
    if missing is not None:
        log.error("graphengine bench train --memory-limits: %s", missing)
        return USAGE
    config = {
        "dataset": args.dataset,
        "root": args.root,
        "fanouts": args.fanouts,
        "batch_size": args.batch_size,
        "hidden": args.hidden,
        "batches": args.batches,
        "threads": args.threads,
        "seed": 0,
        "forward": args.forward,
        "device": args.device,
        "sample_on": None if args.sample_on == "auto" else args.sample_on,
        "tune_peers": False,
        "precision": args.precision,
        "model": args.model,
        "access": args.access,
        "feature_cache": args.feature_cache,
        "feature_reads": args.feature_reads,
        "cache_policy": args.cache_policy,
    }
    summary = memory_limits.run(args.memory_limits, config, timeout_s=args.run_timeout)
    if args.plot is not None:
        from graphengine.plot.memory import plot_memory_limits

        figure_written(plot_memory_limits(summary, args.plot))
    return 0
