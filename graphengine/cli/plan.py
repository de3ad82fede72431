"""``graphengine plan``: which way to split training across the workers is fastest here,
predicted from probes run in the real process group (:mod:`graphengine.plan`)."""

from __future__ import annotations

import argparse
import logging
import sys

import torch

from graphengine import distributed

from . import options, values
from .errors import USAGE, USER_ERRORS
from .output import print_json
from .train import MODELS

log = logging.getLogger("graphengine")

DESCRIPTION = (
    "Predict the training epoch of every way to split it across the workers (data: every "
    "worker the whole dataset; hybrid: P3, feature columns split; partitioned: "
    "--partitions, remote rows fetched; hybrid-partitioned: both) from this machine's rates, "
    "probed in the workers' process group (--nproc N here, or torchrun across hosts), and "
    "the volumes counted from sampled batches; choose the fastest that fits in memory."
)

EPILOG = """\
output: a table (candidate, predicted epoch seconds and its compute, sampling, gather and
exchange seconds, which overlap, so the epoch is not their sum; memory per worker; fits),
the choice and why, with --project a table of data and hybrid at that many hosts, then one
JSON line: choice, reason, workers, candidates (name, parallel, partitioned, epoch_s,
step_s, steps, compute_s, sampling_s, gather_s, exchange_s, memory_bytes, fits, why_not),
rates (what the probes measured, the slowest worker's), volumes (per candidate, per worker
and step), and with --project projections. epoch_s predicts what 'graphengine train'
reports as a steady-state epoch's epoch_s (no evaluation)."""


def add_parser(commands) -> None:
    plan = options.add_command(
        commands,
        "plan",
        "predict the fastest way to split training across workers",
        description=DESCRIPTION,
        epilog=EPILOG,
    )
    plan.add_argument(
        "--dataset",
        help="a catalog name or .npz path, on every worker: the data and hybrid candidates "
        "(default: synthetic-small, unless --partitions is given alone)",
    )
    options.add_root(plan)
    plan.add_argument(
        "--features",
        type=values.at_least(1),
        help="a synthetic dataset generated with this many feature columns (as train's)",
    )
    plan.add_argument(
        "--partitions",
        metavar="DIR",
        help="a partition ('graphengine partition'), one part per worker: the partitioned "
        "and hybrid-partitioned candidates",
    )
    plan.add_argument(
        "--remote-cache",
        type=values.cache_size,
        help="the partitioned candidate's cache of remote rows, as train's --remote-cache",
    )
    options.add_model(plan, MODELS, help="the GNN")
    options.add_hidden(plan, default=128)
    plan.add_argument(
        "--layers", type=values.at_least(1), help="the model's layers (default: one per fanout)"
    )
    options.add_fanouts(plan)
    options.add_batch_size(plan, help="seeds per training step, all workers together")
    options.add_nproc(plan, help="workers on this machine (torchrun)")
    plan.add_argument(
        "--host-mem",
        type=values.byte_size,
        help="host memory a worker may use (64GB, 1.5GiB); default: what is available "
        "on this machine, shared by its workers",
    )
    plan.add_argument("--gpu-mem", type=values.byte_size, help="GPU memory a worker may use (16GB)")
    plan.add_argument(
        "--project",
        type=values.host_counts,
        metavar="HOSTS",
        help="also predict data and hybrid at these worker counts, one a host (8,16,32,64)",
    )
    plan.add_argument(
        "--link-gbps",
        type=values.positive_float,
        help="--project's link in Gbit/s (default: the link probed between the workers)",
    )
    options.add_dist_timeout(plan)
    plan.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Start the workers, or plan as one of them; returns the exit code."""
    from .train_node import for_workers

    fanouts = args.fanouts
    if args.layers is not None and args.layers != len(fanouts):
        raise ValueError(
            f"--layers {args.layers} must equal the number of fanouts {fanouts} (one hop a layer)"
        )
    if args.dataset is None and args.partitions is None:
        args.dataset = "synthetic-small"
    launch = args.nproc > 1 or args.partitions is not None
    if launch and not distributed.launched_by_torchrun():
        if args.batch_size % args.nproc:
            raise ValueError(
                f"--batch-size {args.batch_size} must be a multiple of --nproc {args.nproc}"
            )
        return distributed.launch(args.nproc, for_workers(args.argv))
    from graphengine.runtime import tune_host_allocator

    tune_host_allocator()  # the probes' steps allocate as training's do (train_node)
    rank, world_size, device = 0, 1, torch.device("cpu")
    if distributed.launched_by_torchrun():
        rank, world_size = distributed.join(args.dist_timeout)
        device = distributed.local_device()
    with distributed.ending_on_error(rank, world_size):
        try:
            code = _plan_here(args, rank, world_size, device)
        except USER_ERRORS as error:
            if world_size == 1:
                raise
            log.error("rank %d: %s", rank, error)
            code = USAGE
    if world_size > 1:
        distributed.finish(code, wait=code == 0)
    return code


def _plan_here(args: argparse.Namespace, rank: int, world_size: int, device) -> int:
    from graphengine.nn.models import build_model
    from graphengine.plan import make_plan

    from .train_data import load_once_per_machine

    dataset = partitions = None
    if args.dataset is not None:
        dataset = load_once_per_machine(args.dataset, args.root, world_size, args.features)
    if args.partitions is not None:
        from graphengine.distributed.data import DistData

        partitions = DistData.open(args.partitions, device=device)
    source = dataset if dataset is not None else partitions
    torch.manual_seed(0)
    model = build_model(
        args.model,
        source.num_features,
        args.hidden,
        source.num_classes,
        num_layers=len(args.fanouts),
    )
    plan = make_plan(
        model,
        args.fanouts,
        args.batch_size,
        dataset=dataset,
        partitions=partitions,
        device=device,
        host_memory=args.host_mem,
        gpu_memory=args.gpu_mem,
        remote_cache=args.remote_cache,
        project_hosts=args.project,
        link_gbps=args.link_gbps,
    )
    if rank == 0:
        print_plan(plan)
        print_json(plan.as_json())
    return 0


def print_plan(plan) -> None:
    """The candidates' table, the projections' and the choice, on stdout."""
    from graphengine.bench.report import print_report

    print_report(
        [
            "candidate",
            "epoch s",
            "compute s",
            "sampling s",
            "gather s",
            "exchange s",
            "memory/worker GB",
            "fits",
        ],
        [
            [
                r["name"],
                r["epoch_s"],
                r["compute_s"],
                r["sampling_s"],
                r["gather_s"],
                r["exchange_s"],
                r["memory_bytes"] / 1e9,
                "yes" if r["fits"] else f"no: {r['why_not']}",
            ]
            for r in plan.rows
        ],
        None,
    )
    if plan.projections:
        sys.stdout.write("\nprojected, one worker a host:\n")
        print_report(
            ["hosts", "data epoch s", "hybrid epoch s", "choice"],
            [
                [p["workers"], p["data"]["epoch_s"], p["hybrid"]["epoch_s"], p["choice"]]
                for p in plan.projections
            ],
            None,
        )
    sys.stdout.write(f"\nchoice: {plan.choice} ({plan.chosen.command}): {plan.reason}\n")
    sys.stdout.flush()
