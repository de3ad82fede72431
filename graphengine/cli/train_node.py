"""``graphengine train --task node``: node classification, in this process or in workers
that torchrun starts (``--nproc``, ``--partitions``), each running this same command."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import torch

from graphengine import distributed
from graphengine.datasets.catalog import is_heterogeneous

from .errors import INTERRUPTED, LOST_WORKER, USAGE, USER_ERRORS
from .output import epoch_seconds, print_json
from .train_checks import check_node_options
from .train_data import homogeneous_dataset

log = logging.getLogger("graphengine")


def train_node(args: argparse.Namespace) -> int:
    """Check the options, then start the workers or train here; returns the exit code."""
    from graphengine.runtime import tune_host_allocator
    from graphengine.train.config import split_batch

    check_node_options(args)
    launch = args.nproc > 1 or args.partitions is not None  # parts talk through a group
    if not distributed.launched_by_torchrun():
        # Refused before the data opens or the workers start.
        training_device(args.device, args.nproc if launch else None)
    if launch and not distributed.launched_by_torchrun():
        split_batch(args.batch_size, args.worker_batch_size, args.nproc)  # before the workers
        return distributed.launch(
            args.nproc, for_workers(args.argv), max_restarts=args.max_restarts
        )
    tune_host_allocator()
    rank, world_size = 0, 1
    if distributed.launched_by_torchrun():
        rank, world_size = distributed.join(args.dist_timeout)
    device = training_device(args.device)
    with distributed.ending_on_error(rank, world_size):
        code = _train_here(args, rank, world_size, device)
    if world_size > 1:
        # A worker that stops early cannot wait for the others at a barrier.
        distributed.finish(code, wait=code == 0)
    return code


def training_device(requested: str, workers: int | None = None) -> torch.device:
    """The device ``--device requested`` trains on in this process: under torchrun, a
    worker's ``cuda:LOCAL_RANK`` for ``auto`` (with CUDA) and ``cuda``; in one process
    ``cuda:0``, or ``cuda:N`` as given. ``workers``: the workers this process is about to
    launch on this machine (``None``: it trains itself).

    Raises:
        ValueError: naming why, for a GPU torch cannot use, ``cuda:N`` where workers each
            take their own, or more workers than GPUs.
    """
    if requested == "cpu" or (requested == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        why = "this torch has no CUDA" if torch.version.cuda is None else "torch finds no GPU"
        raise ValueError(f"--device {requested}: {why}; use --device cpu (or auto)")
    under_torchrun = distributed.launched_by_torchrun()
    if workers is not None and workers > torch.cuda.device_count() and requested != "cpu":
        raise ValueError(
            f"--device {requested}: {workers} workers, one GPU each, and this machine has "
            f"{torch.cuda.device_count()}; use fewer workers or --device cpu"
        )
    if requested in ("auto", "cuda"):
        return distributed.local_device() if under_torchrun else torch.device("cuda", 0)
    if under_torchrun or workers is not None:
        raise ValueError(f"--device {requested} names one GPU; each worker takes its own: use cuda")
    index = int(requested.partition(":")[2])
    if index >= torch.cuda.device_count():
        raise ValueError(
            f"--device {requested}: this machine has {torch.cuda.device_count()} GPU(s)"
        )
    return torch.device(requested)


def _train_here(args: argparse.Namespace, rank: int, world_size: int, device) -> int:
    """Train as worker ``rank`` of ``world_size``; rank 0 prints the JSON lines. A user
    error in one of several workers is logged with its rank and returns exit code 2; a
    collective that failed because another worker stopped answering is logged naming that
    worker (also in torchrun's error file, for its "Root Cause") and returns exit code 3."""
    saved = {"epoch": None}  # the epoch of the checkpoint on disk, once known
    try:
        torch.manual_seed(args.seed)
        dataset = _open_dataset(args, world_size, device)
        log.info("%s", dataset)
        trainer = _trainer(args, dataset, rank, device)
        if trainer.epoch > 0:
            saved["epoch"] = trainer.epoch

        def on_epoch(metrics: dict) -> None:
            if args.checkpoint is not None:
                saved["epoch"] = metrics["epoch"]  # fit saved it before calling this
            print_json(metrics)

        history = trainer.fit(args.epochs, eval_every=args.eval_every, on_epoch=on_epoch)
        accuracies = trainer.evaluate_all() if args.eval_every > 0 else {}  # every rank
    except KeyboardInterrupt:
        if rank == 0:
            log_interrupted(args.checkpoint, saved["epoch"])
        return INTERRUPTED
    except USER_ERRORS as error:
        if world_size == 1:
            raise
        log.error("rank %d: %s", rank, error)
        return USAGE
    except Exception as error:
        lost = distributed.lost_worker(error)
        if lost is None:
            raise
        # Recorded before it is logged: torchrun's Root Cause is the failure recorded first,
        # and the worker lost may be ended (by its agent or a user) as soon as this is read.
        distributed.record_failure(lost)
        log.error("rank %d: %s", rank, lost)
        return LOST_WORKER
    if rank == 0:
        record = result(args, dataset.name, trainer.epoch, world_size, history, accuracies)
        record["parallel"] = trainer.config.parallel  # --plan auto: the one it chose
        print_json(record)
    return 0


def _hetero(args: argparse.Namespace) -> bool:
    return args.partitions is None and is_heterogeneous(args.dataset)


def _open_dataset(args: argparse.Namespace, world_size: int, device):
    """This worker's data: its part of ``--partitions``, or the whole ``--dataset``."""
    from graphengine.datasets import load_hetero_dataset
    from graphengine.distributed.data import DistData

    if args.partitions is not None:
        return DistData.open(args.partitions, device=device)
    if _hetero(args):
        return load_hetero_dataset(args.dataset, root=args.root)
    return homogeneous_dataset(args, world_size)


def _trainer(args: argparse.Namespace, dataset, rank: int, device):
    """The model ``--model`` and the Trainer that fits it to ``dataset``."""
    from graphengine.nn.models import build_model
    from graphengine.train.trainer import Trainer

    model = build_model(
        args.model,
        dataset.num_features,
        args.hidden,
        dataset.num_classes,
        num_layers=len(args.fanouts),
        dropout=args.dropout,
        metadata=dataset.metadata() if _hetero(args) else None,
    )
    return Trainer(model, dataset, config=train_config(args, rank, device))


def train_config(args: argparse.Namespace, rank: int, device):
    """The :class:`~graphengine.train.config.TrainConfig` the options describe, for worker
    ``rank`` training on ``device``."""
    from graphengine.train.config import TrainConfig

    return TrainConfig(
        fanouts=args.fanouts,
        batch_size=args.batch_size,
        worker_batch_size=args.worker_batch_size,
        lr=args.lr,
        weight_decay=args.weight_decay,
        seed=args.seed,
        eval_mode=args.eval,
        num_workers=args.num_workers,
        checkpoint=args.checkpoint,
        metrics_path=args.metrics,
        progress=rank == 0 and not args.no_progress and sys.stderr.isatty(),
        device=device,
        remote_cache=args.remote_cache,
        parallel="auto" if args.plan == "auto" else args.parallel,
        sampler=sampler(args),
        precision=args.precision,
        feature_cache=args.feature_cache,
        bf16_features=not args.no_bf16_features,
        aggregate_from_store=args.aggregate_from_store,
    )


def sampler(args: argparse.Namespace):
    """The Trainer's ``sampler`` for ``args``: a name, or how subgraphs are drawn."""
    from graphengine.train.subgraph import SubgraphSampling

    if args.sampler == "cluster":
        options = {"clusters_per_batch": args.clusters_per_batch} if args.clusters_per_batch else {}
        return SubgraphSampling(
            "cluster", num_parts=args.num_parts, cluster_dir=args.cluster_dir, **options
        )
    if args.sampler == "saint":
        options = {"walk_length": args.walk_length} if args.walk_length else {}
        return SubgraphSampling("saint", roots=args.batch_size, **options)
    return args.sampler


def result(args, dataset: str, epochs: int, workers: int, history: list, accuracies: dict):
    """The final JSON line of ``train`` (its fields are described in the train epilog)."""
    return {
        "dataset": dataset,
        "model": args.model,
        "epochs": epochs,
        "epochs_run": len(history),
        "workers": workers,
        "parallel": args.parallel,
        "sampler": args.sampler,
        **accuracies,
        "train_acc_running": history[-1]["train_acc"] if history else None,
        **epoch_seconds(history),
    }


def log_interrupted(checkpoint: str | None, epoch: int | None) -> None:
    """Say where training can resume from after Ctrl-C."""
    if checkpoint is None:
        log.error("interrupted: no checkpoint was saved (--checkpoint FILE saves one every epoch)")
    elif Path(checkpoint).is_file():
        at = f" (after epoch {epoch})" if epoch is not None else ""
        log.error(
            "interrupted: the last checkpoint is %s%s; run the same command to resume from it",
            checkpoint,
            at,
        )
    else:
        log.error("interrupted before the first epoch ended: no checkpoint was saved")


# The options of the process that starts torchrun; its workers are not given them.
LAUNCHER_OPTIONS = ("--nproc", "--max-restarts")


def for_workers(argv: list[str]) -> list[str]:
    """``argv`` without the launcher's options (:data:`LAUNCHER_OPTIONS`), for the workers
    torchrun starts."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg in LAUNCHER_OPTIONS:
            skip = True
        elif not arg.startswith(tuple(f"{option}=" for option in LAUNCHER_OPTIONS)):
            out.append(arg)
    return out
