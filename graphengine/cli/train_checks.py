"""The checks of ``graphengine train``'s options that argparse cannot make alone: which
options a task, a sampler, a dataset kind or a partition takes. Each raises ``ValueError``
naming the option (exit code 2), before any dataset is loaded or generated."""

from __future__ import annotations

import argparse
import os

from graphengine import distributed
from graphengine.datasets.catalog import is_heterogeneous

from .paths import check_output_directory, check_output_file

# The options of one sampler only, by the sampler that takes them.
SAMPLER_OPTIONS = {
    "cluster": ("num_parts", "cluster_dir", "clusters_per_batch"),
    "saint": ("walk_length",),
}


def check_task_options(args: argparse.Namespace) -> None:
    """Refuse options that the task or the sampler do not take, and output paths that
    cannot be written (found only when the first epoch ended, before)."""
    if args.task != "link" and args.decoder != "dot":
        raise ValueError("--decoder is an option of --task link")
    if args.task == "link":
        _check_link_options(args)
    if args.task == "link" or args.sampler in ("cluster", "saint"):
        _check_one_process(args)
    hetero = args.partitions is None and is_heterogeneous(args.dataset)
    if hetero and args.sampler != "neighbor":
        raise ValueError(
            f"--sampler {args.sampler} trains homogeneous datasets; {args.dataset} is heterogeneous"
        )
    if args.normalize_features and args.partitions is not None:
        raise ValueError("--normalize-features changes a dataset; a partition keeps its own")
    if args.normalize_features and hetero:
        raise ValueError(
            f"--normalize-features scales a homogeneous dataset's features; {args.dataset} is "
            "heterogeneous"
        )
    if args.task == "link" and hetero:
        raise ValueError(
            f"--task link trains on homogeneous datasets; {args.dataset} is heterogeneous"
        )
    for sampler, options in SAMPLER_OPTIONS.items():
        given = [o for o in options if getattr(args, o) is not None]
        if given and args.sampler != sampler:
            option = "--" + given[0].replace("_", "-")
            raise ValueError(f"{option} is an option of --sampler {sampler}")
    _check_output_paths(args)


def _check_output_paths(args: argparse.Namespace) -> None:
    """Refuse the files and directories training writes where they cannot be written."""
    if args.checkpoint is not None:
        check_output_file("--checkpoint", args.checkpoint, replaced=True)
    if args.metrics is not None:
        check_output_file("--metrics", args.metrics)
    if args.cluster_dir is not None:
        check_output_directory("--cluster-dir", args.cluster_dir)


def _check_link_options(args: argparse.Namespace) -> None:
    if args.precision != "fp32":
        raise ValueError(f"--precision {args.precision} trains node classification for now")
    if args.eval == "sampled":
        raise ValueError(
            "--task link evaluates on every node's embedding: --eval full, layerwise or auto"
        )
    if args.sampler != "neighbor":
        raise ValueError(f"--sampler {args.sampler} chooses node classification's batches")


def _check_one_process(args: argparse.Namespace) -> None:
    """Refuse the multi-process options where ``--task link`` or a subgraph sampler trains
    in one process."""
    what = "--task link" if args.task == "link" else f"--sampler {args.sampler}"
    for option, value in (
        ("--nproc", args.nproc > 1 or distributed.launched_by_torchrun()),
        ("--max-restarts", args.max_restarts > 0),
        ("--partitions", args.partitions is not None),
        ("--parallel hybrid", args.parallel == "hybrid"),
        ("--plan auto", args.plan == "auto"),
        ("--checkpoint", args.checkpoint is not None),
        ("--remote-cache", args.remote_cache is not None),
    ):
        if value:
            raise ValueError(f"{what} trains in one process without {option} for now")


def check_node_options(args: argparse.Namespace) -> None:
    """Refuse what ``--task node`` cannot train with these workers (under torchrun, the
    group's size; else ``--nproc``), partition and dataset."""
    if args.partitions is not None:
        check_partition_workers(args.partitions, args.nproc)
    _check_max_restarts(args)
    if args.remote_cache is not None and args.partitions is None:
        raise ValueError("--remote-cache needs --partitions")
    if args.feature_cache is not None and args.partitions is not None:
        raise ValueError("--feature-cache caches an unpartitioned graph's features for --task node")
    if args.features is not None and args.partitions is not None:
        raise ValueError("--features generates a dataset; a partition keeps its own features")
    workers = _workers(args.nproc)
    if args.partitions is None and is_heterogeneous(args.dataset):
        check_hetero_options(args, workers)
    if args.plan == "auto" and args.partitions is None and is_heterogeneous(args.dataset):
        raise ValueError("--plan auto chooses for a homogeneous dataset or a partition")
    if args.parallel == "hybrid" and workers < 2:
        raise ValueError(f"--parallel hybrid needs 2 or more workers (got --nproc {workers})")
    if args.parallel == "hybrid" and args.remote_cache is not None:
        raise ValueError(
            "--remote-cache caches other parts' feature rows for --parallel data; with "
            "--parallel hybrid each worker holds its columns of every node: drop it"
        )
    if args.parallel == "hybrid" and args.eval in ("full", "layerwise"):
        raise ValueError(
            f"--parallel hybrid evaluates sampled mini-batches, not --eval {args.eval}"
        )


def _check_max_restarts(args: argparse.Namespace) -> None:
    """Refuse ``--max-restarts`` where ``graphengine train`` starts no torchrun to pass it
    to: in one process, or in a worker of the user's own torchrun (whose launcher already
    has the option)."""
    if args.max_restarts == 0:
        return
    if distributed.launched_by_torchrun():
        raise ValueError(
            f"--max-restarts {args.max_restarts} is for the torchrun that --nproc starts; "
            f"under your own torchrun, give it --max-restarts {args.max_restarts} instead"
        )
    if args.nproc == 1 and args.partitions is None:
        raise ValueError(
            f"--max-restarts {args.max_restarts} restarts the workers of --nproc N or "
            "--partitions; one process (--nproc 1) has none to restart"
        )


def check_hetero_options(args: argparse.Namespace, workers: int) -> None:
    """Refuse what heterogeneous datasets do not train with: several workers, --parallel
    hybrid, --features, full or layer-wise evaluation, models other than sage."""
    from graphengine.nn.models import check_hetero_model

    name = args.dataset
    if workers > 1:
        raise ValueError(
            f"--nproc {workers}: heterogeneous datasets ({name}) train in a single process "
            "for now; drop --nproc"
        )
    if args.parallel == "hybrid":
        raise ValueError(
            f"--parallel hybrid is not available for heterogeneous datasets ({name}); "
            "drop it (one process, --parallel data)"
        )
    if args.features is not None:
        raise ValueError(
            f"--features generates a homogeneous synthetic dataset; {name} is heterogeneous "
            "and keeps its own features"
        )
    if args.eval in ("full", "layerwise"):
        raise ValueError(
            f"--eval {args.eval} is not available for heterogeneous datasets ({name}) yet: "
            "use --eval sampled (or auto)"
        )
    check_hetero_model(args.model)


def check_partition_workers(path: str, nproc: int) -> None:
    """Raise unless ``path`` is a partition with one part per worker."""
    from graphengine.data.partition import load_partition

    parts = load_partition(path, verify=False).num_parts
    workers = _workers(nproc)
    if parts != workers:
        raise ValueError(
            f"--partitions '{path}' has {parts} parts: train it with one worker per part "
            f"(--nproc {parts}), not {workers}"
        )


def _workers(nproc: int) -> int:
    """The training's workers: under torchrun, the group's size; else ``nproc``."""
    return int(os.environ["WORLD_SIZE"]) if distributed.launched_by_torchrun() else nproc
