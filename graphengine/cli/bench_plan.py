"""``graphengine bench plan``: the planner's choice and predicted epochs against every
candidate trained for real on an emulated cluster (:mod:`graphengine.bench.plan`)."""

from __future__ import annotations

import logging

from graphengine.bench.plan_stats import CANDIDATES, LINKS

from . import options, values
from .errors import USAGE
from .output import figure_written
from .paths import check_figure_file, check_output_file

log = logging.getLogger(__name__)


def add_parser(benches) -> None:
    plan = options.add_command(
        benches,
        "plan",
        "the planner's choice and predictions vs every candidate run on an emulated cluster",
        description="For every host count, link, feature width and hidden width: "
        "'graphengine plan' under torchrun on emulated hosts (network namespaces, as root), "
        "then every candidate trained for real there; reports each candidate's measured and "
        "predicted epoch, the choice against the fastest and against always-data and "
        "always-hybrid. Every run's JSON goes to --out as it ends.",
    )
    plan.add_argument(
        "--hosts", type=values.ints, default=[2, 3], help="emulated host counts (one worker each)"
    )
    plan.add_argument(
        "--links",
        type=options.choices_of(LINKS),
        default=list(LINKS),
        help="fast: links that carry what this machine pushes through the bridge (measured, "
        "see --fast-mbit); slow: --slow-factor times slower, set with tbf",
    )
    plan.add_argument(
        "--fast-mbit",
        type=values.positive_float,
        help="shape the fast links to this rate in Mbit/s instead of measuring what the "
        "machine carries (the slow ones' follows)",
    )
    plan.add_argument(
        "--slow-factor",
        type=values.positive_float,
        default=10.0,
        help="how many times slower the slow links are",
    )
    plan.add_argument(
        "--widths", type=values.ints, default=[100, 512], help="feature widths (one store each)"
    )
    plan.add_argument("--hidden", type=values.ints, default=[64, 256], help="hidden widths")
    plan.add_argument(
        "--candidates",
        type=options.choices_of(CANDIDATES),
        default=list(CANDIDATES),
        help="the candidates trained for real",
    )
    plan.add_argument(
        "--nodes",
        type=values.at_least(1024),
        default=2**16,
        help="nodes of the dataset: synthetic-products' proportions (edges, training and "
        "validation nodes, 47 classes) at this size",
    )
    options.add_fanouts(plan)
    plan.set_defaults(fanouts=[10, 5])
    options.add_batch_size(plan, help="seeds per step, all hosts together (a multiple of each K)")
    plan.set_defaults(batch_size=1200)
    plan.add_argument(
        "--epochs",
        type=values.at_least(2),
        default=2,
        help="epochs of every run; the mean epoch_s of those after the first is the measurement",
    )
    plan.add_argument(
        "--accuracy",
        action="store_true",
        help="also evaluate every candidate after its last epoch and train each width and "
        "hidden width once on one machine: the test accuracy's gap, in points",
    )
    plan.add_argument(
        "--out",
        default="bench-plan.jsonl",
        help="the raw results, one JSON line a run, appended as each run ends",
    )
    plan.add_argument(
        "--work",
        help="where the datasets, partitions and hosts' copies go, kept for a rerun "
        "(default: a temporary directory, removed at the end)",
    )
    plan.add_argument(
        "--subnet",
        type=values.at_least(0),
        default=50,
        help="the emulated hosts' addresses: 198.18.SUBNET.0/24 (0 to 255)",
    )
    plan.add_argument(
        "--run-timeout",
        type=values.positive_float,
        default=600.0,
        help="seconds one plan or training run may take before it is stopped (and failed)",
    )
    options.add_plot(
        plan,
        help="draw every candidate's measured and predicted epoch against the hosts, a panel "
        "per link and width, the planner's choice ringed",
    )
    plan.set_defaults(run=run)


def run(args) -> int:
    from graphengine.bench.plan import BenchConfig
    from graphengine.bench.plan import run as run_bench
    from graphengine.distributed.emulated_cluster import emulation_unavailable

    check_output_file("--out", args.out)
    if args.plot is not None:
        check_figure_file("--plot", args.plot)
    unavailable = emulation_unavailable()
    if unavailable is not None:
        log.error("graphengine bench plan runs on an emulated cluster: %s", unavailable)
        return USAGE
    summary = run_bench(
        BenchConfig(
            hosts=args.hosts,
            links=args.links,
            widths=args.widths,
            hiddens=args.hidden,
            candidates=args.candidates,
            nodes=args.nodes,
            fanouts=args.fanouts,
            batch_size=args.batch_size,
            epochs=args.epochs,
            slow_factor=args.slow_factor,
            fast_mbit=args.fast_mbit,
            accuracy=args.accuracy,
            out=args.out,
            work=args.work,
            subnet=args.subnet,
            run_timeout_s=args.run_timeout,
        )
    )
    if args.plot is not None:
        from graphengine.plot.parallel import plot_plan_bench

        figure_written(plot_plan_bench(summary["results"], args.plot))
    return 0
