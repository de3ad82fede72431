"""The ``graphengine`` command: ``train``, ``datasets`` and ``bench``."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

import torch

from graphengine import distributed
from graphengine.nn.forward import FORWARDS

log = logging.getLogger("graphengine")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = _parser().parse_args(argv)
    args.argv = argv
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        return args.run(args)
    except (ValueError, FileNotFoundError, NotImplementedError, RuntimeError) as error:
        log.error("%s", error)
        return 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="graphengine", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    train = commands.add_parser("train", help="node classification on a dataset")
    _dataset_args(train)
    train.add_argument("--model", choices=["sage", "gcn", "gat"], default="sage")
    train.add_argument("--fanouts", type=_fanouts, default=[15, 10, 5])
    train.add_argument("--batch-size", type=int, default=1024)
    train.add_argument("--epochs", type=int, default=3)
    train.add_argument("--hidden", type=int, default=128)
    train.add_argument("--lr", type=float, default=0.003)
    train.add_argument("--weight-decay", type=float, default=0.0)
    train.add_argument("--dropout", type=float, default=0.5)
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--eval", choices=["auto", "full", "sampled"], default="auto")
    train.add_argument("--eval-every", type=int, default=1, help="0: never evaluate")
    train.add_argument("--num-workers", type=int, default=1, help="sampling threads")
    train.add_argument("--checkpoint", help="save every epoch; resume when it exists")
    train.add_argument("--metrics", help="append per-epoch JSON lines to this file")
    train.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    train.add_argument(
        "--nproc", type=int, default=1, help="data-parallel workers on this machine (torchrun)"
    )
    train.add_argument(
        "--dist-timeout",
        type=float,
        default=300.0,
        help="seconds a worker waits for the others before failing",
    )
    train.set_defaults(run=_train)

    build = commands.add_parser("build", help="compile the C++/CUDA extension (cached)")
    build.add_argument("--verbose", action="store_true", help="show the compiler's output")
    build.set_defaults(run=_build)

    datasets = commands.add_parser("datasets", help="list the catalog and what is on disk")
    datasets.add_argument("--root", help="data root (default: $GRAPHENGINE_DATA or datasets/)")
    datasets.set_defaults(run=_datasets)

    bench = commands.add_parser("bench", help="benchmarks: a table, then one JSON line")
    benches = bench.add_subparsers(dest="bench", required=True)
    sample = benches.add_parser("sample", help="neighbor sampling through the NeighborLoader")
    _dataset_args(sample, default="synthetic-products")
    sample.add_argument("--fanouts", type=_fanouts, default=[15, 10, 5])
    sample.add_argument("--batch-size", type=int, default=1024)
    sample.add_argument("--batches", type=int, default=20)
    sample.add_argument("--threads", type=int, default=1)
    sample.add_argument("--vs", choices=["pyg"], help="also time PyG's NeighborLoader")
    sample.set_defaults(run=_bench_sample)
    train_bench = benches.add_parser("train", help="end-to-end training steps, vs PyG's loop")
    _dataset_args(train_bench, default="synthetic-products")
    train_bench.add_argument("--model", choices=["sage"], default="sage")
    train_bench.add_argument("--fanouts", type=_fanouts, default=[15, 10, 5])
    train_bench.add_argument("--batch-size", type=int, default=1024)
    train_bench.add_argument("--hidden", type=int, default=256)
    train_bench.add_argument("--batches", type=int, default=5)
    train_bench.add_argument("--threads", type=int, default=2)
    train_bench.add_argument(
        "--epochs", type=int, default=0, help="also train E epochs for accuracy"
    )
    train_bench.add_argument("--vs", choices=["pyg"], help="also time PyG's NeighborLoader loop")
    train_bench.add_argument(
        "--forward",
        choices=FORWARDS,
        default="auto",
        help="how graphengine's Trainer runs the model on a batch (default: blocks)",
    )
    train_bench.add_argument(
        "--device",
        default="cpu",
        help="where the models train (e.g. cuda); loading stays on the CPU",
    )
    train_bench.add_argument(
        "--nproc",
        type=int,
        default=1,
        help="instead: epochs of graphengine train with 1..N data-parallel workers",
    )
    train_bench.set_defaults(run=_bench_train)
    gather = benches.add_parser("gather", help="feature-row gathers vs copy bandwidth")
    gather.add_argument("--table-mib", type=int, default=1024)
    gather.add_argument("--cols", type=int, default=128)
    gather.add_argument("--ids", type=int, default=200_000)
    gather.add_argument("--repeats", type=int, default=10)
    gather.add_argument("--threads", type=int, default=1)
    gather.set_defaults(run=_bench_gather)
    scaling = benches.add_parser("scaling", help="sampling cost per edge as the graph grows")
    scaling.add_argument("--log2-nodes", type=_ints, default=[16, 18, 20, 22])
    scaling.add_argument("--fanouts", type=_fanouts, default=[15, 10, 5])
    scaling.add_argument("--batch-size", type=int, default=1024)
    scaling.add_argument("--batches", type=int, default=20)
    scaling.add_argument("--threads", type=int, default=1)
    scaling.set_defaults(run=_bench_scaling)
    return parser


def _dataset_args(parser: argparse.ArgumentParser, default: str = "synthetic-small") -> None:
    parser.add_argument("--dataset", default=default, help="catalog name or path to a .npz file")
    parser.add_argument("--root", help="data root (default: $GRAPHENGINE_DATA or datasets/)")


def _ints(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated ints (got {text!r})") from None


def _fanouts(text: str) -> list[int]:
    values = _ints(text)
    if any(v < -1 for v in values):
        raise argparse.ArgumentTypeError(f"fanouts must be >= -1 (got {text!r})")
    return values


def _train(args) -> int:
    from graphengine.nn.models import build_model
    from graphengine.runtime import tune_host_allocator
    from graphengine.train.trainer import Trainer

    if args.nproc > 1 and not distributed.launched_by_torchrun():
        return distributed.launch(args.nproc, _without_nproc(args.argv))
    tune_host_allocator()
    rank, world_size = 0, 1
    device = torch.device("cpu")
    if distributed.launched_by_torchrun():
        rank, world_size = distributed.join(args.dist_timeout)
        device = distributed.local_device()
    torch.manual_seed(args.seed)
    dataset = _load_once_per_machine(args.dataset, args.root, world_size)
    log.info("%s", dataset)
    model = build_model(
        args.model,
        dataset.num_features,
        args.hidden,
        dataset.num_classes,
        num_layers=len(args.fanouts),
        dropout=args.dropout,
    )
    trainer = Trainer(
        model,
        dataset,
        fanouts=args.fanouts,
        batch_size=args.batch_size,
        lr=args.lr,
        weight_decay=args.weight_decay,
        seed=args.seed,
        eval_mode=args.eval,
        num_workers=args.num_workers,
        checkpoint=args.checkpoint,
        metrics_path=args.metrics,
        progress=rank == 0 and not args.no_progress and sys.stderr.isatty(),
        device=device,
    )
    history = trainer.fit(args.epochs, eval_every=args.eval_every)
    accuracies = trainer.evaluate_all() if args.eval_every > 0 else {}  # every rank takes part
    if rank == 0:
        for metrics in history:
            print(json.dumps(metrics))
        result = {
            "dataset": dataset.name,
            "model": args.model,
            "epochs": trainer.epoch,
            "workers": world_size,
            **accuracies,
            "epoch_s": sum(m["epoch_s"] for m in history) / max(len(history), 1),
        }
        print(json.dumps(result))
    if world_size > 1:
        distributed.finish(0)
    return 0


def _build(args) -> int:
    from graphengine import ops

    if not ops.build_extension(verbose=args.verbose):
        log.error("the extension did not build: %s", ops.build_error())
        return 1
    kernels = "CPU and CUDA" if ops.with_cuda() else "CPU (this torch has no CUDA)"
    print(json.dumps({"extension": "built", "kernels": kernels, "torch": torch.__version__}))
    return 0


def _without_nproc(argv: list[str]) -> list[str]:
    """``argv`` without its ``--nproc`` option, for the workers torchrun starts."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--nproc":
            skip = True
        elif not arg.startswith("--nproc="):
            out.append(arg)
    return out


def _load_once_per_machine(name: str, root: str | None, world_size: int):
    """Local rank 0 loads (and generates, for a synthetic dataset) first; the other workers
    then open the same memory-mapped files, so the machine holds one copy."""
    from graphengine.datasets import load_dataset

    if world_size == 1:
        return load_dataset(name, root=root)
    first = int(os.environ.get("LOCAL_RANK", 0)) == 0
    dataset = load_dataset(name, root=root) if first else None
    torch.distributed.barrier()
    return dataset if first else load_dataset(name, root=root)


def _datasets(args) -> int:
    from graphengine.bench.report import print_report
    from graphengine.datasets import CATALOG, default_root, is_available

    root = args.root or default_root()
    rows = [
        [name, entry.kind, "yes" if is_available(name, root) else "no", entry.description]
        for name, entry in CATALOG.items()
    ]
    summary = {"root": str(root), "on_disk": [r[0] for r in rows if r[2] == "yes"]}
    print_report(["name", "kind", "on disk", "description"], rows, summary)
    return 0


def _bench_sample(args) -> int:
    from graphengine.bench import sample

    sample.run(
        args.dataset,
        args.fanouts,
        args.batch_size,
        args.batches,
        args.threads,
        root=args.root,
        vs_pyg=args.vs == "pyg",
    )
    return 0


def _bench_train(args) -> int:
    from graphengine.bench import train

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
        vs_pyg=args.vs == "pyg",
        epochs=args.epochs,
        forward=args.forward,
        device=args.device,
    )
    return 0


def _bench_gather(args) -> int:
    from graphengine.bench import gather

    gather.run(args.table_mib, args.cols, args.ids, args.repeats, args.threads)
    return 0


def _bench_scaling(args) -> int:
    from graphengine.bench import scaling

    scaling.run(args.log2_nodes, args.fanouts, args.batch_size, args.batches, args.threads)
    return 0
