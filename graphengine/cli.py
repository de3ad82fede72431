"""The ``graphengine`` command: ``train``, ``partition``, ``datasets``, ``build`` and ``bench``.

Parsing, checking the options and reporting (JSON results on stdout, logs on stderr) are
here; the work is done by :mod:`graphengine.train`, :mod:`graphengine.data.partition`,
:mod:`graphengine.datasets` and :mod:`graphengine.bench`.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import resource
import shutil
import sys
import time
from pathlib import Path

import torch

from graphengine import distributed
from graphengine.data.disk_io import ACCESS
from graphengine.data.partition import METHODS as PARTITION_METHODS
from graphengine.datasets import CATALOG
from graphengine.datasets.catalog import PAPERS_SCALE, is_heterogeneous
from graphengine.datasets.ogb import OGB
from graphengine.datasets.papers import MAX_SCALE, store_name
from graphengine.datasets.reorder import ORDERS
from graphengine.nn.decoders import DECODERS
from graphengine.nn.forward import FORWARDS
from graphengine.parallel.select import PARALLEL_MODES
from graphengine.train.evaluate import EVAL_MODES
from graphengine.train.subgraph import SAMPLERS

log = logging.getLogger("graphengine")

DESCRIPTION = """\
Mini-batch GNN training on large graphs: node classification, graph partitioning, the
dataset catalog and benchmarks. Run 'graphengine build' once to compile the C++ gather
extension (without it, gathers fall back to torch.index_select). 'graphengine COMMAND
--help' shows each command's options."""

TRAIN_EPILOG = """\
output (--task node): one JSON line per epoch on stdout as it ends (epoch, loss,
train_acc: the running accuracy on that epoch's training batches, val_acc, epoch_s,
seeds_per_s, stage_s; with --partitions also partition: rows, bytes and edges that crossed
parts, cut_edge_share, cache_hit_rate, seconds in exchanges; traffic, all workers together:
feature_bytes read into batches, gradient_bytes all-reduced, moved_bytes sent between
workers, and with --parallel hybrid the first layers' structure_sent_bytes and
partial_sent_bytes and exchange_seconds_per_worker), then a final JSON line: dataset,
model, epochs (in total), epochs_run (by this command), workers, parallel, sampler;
train_acc, val_acc, test_acc: the trained model evaluated on each split (--eval; absent
with --eval-every 0); train_acc_running: the last epoch's running training accuracy
(dropout on, weights changing while it is counted); first_epoch_s: the first epoch run's
seconds (it includes compiling the Numba kernels); epoch_s: the mean seconds of the later
epochs (of the first when only one ran).
output (--task link): one JSON line per epoch (epoch, loss, epoch_s, edges_per_s, stage_s,
and when evaluated val_auc, val_mrr, val_hits@1, @3, @10), then a final JSON line: task,
dataset, model, decoder, epochs, train_edges, val_* and test_* metrics, first_epoch_s,
epoch_s.
Logs and the progress bar go to stderr. Ctrl-C stops after logging where the last
checkpoint is (exit code 130). Exit code 2: bad options or input."""

TASKS = ("node", "link")

# Exceptions that are the user's to fix: one log line and exit code 2, no traceback.
USER_ERRORS = (ValueError, FileNotFoundError, NotImplementedError)
INTERRUPTED = distributed.INTERRUPTED


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and epilogs kept as written; each option's default after its help
    (lists comma-separated as typed; none for flags and options without one)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text, default = action.help or "", action.default
        if not action.option_strings or default is None or default is False:
            return text
        if default is argparse.SUPPRESS or "%(default)" in text:
            return text
        shown = ",".join(map(str, default)) if isinstance(default, list) else "%(default)s"
        return f"{text} (default: {shown})"


def main(argv: list[str] | None = None) -> int:
    """Run ``graphengine <argv>`` (default: ``sys.argv[1:]``); returns the exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = _parser()
    args = parser.parse_args(_join_negative_values(argv))
    args.argv = argv
    if getattr(args, "scale", None) is not None:
        if args.dataset != "synthetic-papers":
            parser.error(f"--scale sizes --dataset synthetic-papers (got {args.dataset!r})")
        args.dataset = store_name(args.scale)  # what every command and child process opens
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        return args.run(args)
    except USER_ERRORS as error:
        log.error("%s", error)
        return 2
    except KeyboardInterrupt:
        log.error("interrupted")
        return INTERRUPTED


def _join_negative_values(argv: list[str]) -> list[str]:
    """``argv`` with ``--fanouts -1,-1`` written as ``--fanouts=-1,-1``: argparse would
    otherwise read a value starting with ``-`` as an option."""
    out, i = [], 0
    while i < len(argv):
        if argv[i] == "--":
            return out + argv[i:]
        value = argv[i + 1] if i + 1 < len(argv) else ""
        if argv[i] == "--fanouts" and value[:1] == "-" and value[1:2].isdigit():
            out.append(f"--fanouts={value}")
            i += 2
        else:
            out.append(argv[i])
            i += 1
    return out


ROOT_HELP = "data root (default: $GRAPHENGINE_DATA or datasets/)"
FANOUTS_HELP = (
    "neighbors sampled per hop, comma-separated, first hop (the seeds' neighbors) first; "
    "-1 takes all neighbors; one hop per model layer (e.g. 15,10,5 or -1,-1)"
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="graphengine", description=DESCRIPTION, formatter_class=_Formatter
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    train = commands.add_parser(
        "train",
        help="node classification or link prediction on a dataset",
        description="Train a GNN for node classification on sampled mini-batches. A "
        "heterogeneous dataset (synthetic-hetero) trains PyG's to_hetero GraphSAGE (--model "
        "sage) on its papers, in one process, evaluated on sampled mini-batches. With --task "
        "link, train the GNN as an encoder of a link predictor instead (see --task).",
        epilog=TRAIN_EPILOG,
        formatter_class=_Formatter,
    )
    _dataset_args(train)
    train.add_argument(
        "--features",
        type=_at_least(1),
        help="a synthetic dataset generated with this many feature columns (cached as "
        "NAME-xF: the same graph, other features and splits)",
    )
    train.add_argument(
        "--model", choices=["sage", "gcn", "gin", "gat"], default="sage", help="the GNN"
    )
    train.add_argument("--fanouts", type=_fanouts, default=[15, 10, 5], help=FANOUTS_HELP)
    train.add_argument(
        "--batch-size",
        type=_at_least(1),
        default=1024,
        help="seeds per training step, all workers together: with --nproc N each worker takes "
        "a 1/N share of every step (a multiple of N), so an epoch has as many steps as on one",
    )
    train.add_argument(
        "--worker-batch-size",
        type=_at_least(1),
        help="instead of --batch-size: seeds per step for each worker (N times fewer steps)",
    )
    train.add_argument(
        "--epochs", type=_at_least(1), default=3, help="epochs in total (resumed ones count)"
    )
    train.add_argument("--hidden", type=_at_least(1), default=128, help="hidden channels")
    train.add_argument("--lr", type=_positive_float, default=0.003, help="Adam's learning rate")
    train.add_argument(
        "--weight-decay", type=_nonnegative_float, default=0.0, help="Adam's weight decay"
    )
    train.add_argument(
        "--dropout", type=_dropout, default=0.5, help="dropout probability, in [0, 1)"
    )
    train.add_argument("--seed", type=int, default=0, help="seeds the weights and the batches")
    train.add_argument(
        "--task",
        choices=TASKS,
        default="node",
        help="node: node classification; link: link prediction on a homogeneous dataset, in "
        "one process: the edges are split as PyG's RandomLinkSplit (10%% validation, 10%% "
        "test, seeded), the GNN (its output --hidden wide) encodes the nodes of "
        "LinkNeighborLoader batches of training edges with one uniform negative pair each, "
        "--decoder scores pairs; reported: auc, mrr and hits@1,3,10 (each positive edge "
        "ranked among 100 non-edges from its source) on validation and test edges",
    )
    train.add_argument(
        "--decoder",
        choices=DECODERS,
        default="dot",
        help="--task link: dot (the embeddings' dot product, as GAE) or mlp (a two-layer "
        "perceptron on their element-wise product)",
    )
    train.add_argument(
        "--sampler",
        choices=SAMPLERS,
        default="neighbor",
        help="--task node, the training batches: neighbor (NeighborLoader), labor "
        "(LaborLoader, the same fanouts), cluster (Cluster-GCN: --clusters-per-batch METIS "
        "clusters a batch) or saint (GraphSAINT: --batch-size random walks of --walk-length "
        "steps a batch, the loss weighted by node_norm); cluster and saint run the model "
        "on the whole subgraph, in one process",
    )
    train.add_argument(
        "--num-parts",
        type=_at_least(1),
        help="--sampler cluster: METIS clusters (default: one per 1000 nodes)",
    )
    train.add_argument(
        "--clusters-per-batch",
        type=_at_least(1),
        help="--sampler cluster: clusters a batch (default: 20)",
    )
    train.add_argument(
        "--cluster-dir",
        help="--sampler cluster: a directory to cache the clusters in (a writable one)",
    )
    train.add_argument(
        "--walk-length",
        type=_at_least(1),
        help="--sampler saint: steps per walk (default: 2)",
    )
    train.add_argument(
        "--precision",
        choices=("fp32", "bf16"),
        default="fp32",
        help="bf16: training steps under autocast to bfloat16 (faster on AVX-512 BF16 or AMX "
        "CPUs and on GPUs; weights, loss and evaluation stay float32)",
    )
    train.add_argument(
        "--no-bf16-features",
        action="store_true",
        help="with --precision bf16, gather float32 training batches even where the model's "
        "first layer casts them to bfloat16 anyway (by default a bfloat16 copy of the features "
        "is made once, when it fits in a quarter of the memory available)",
    )
    train.add_argument(
        "--aggregate-from-store",
        action="store_true",
        help="a fused GraphSAGE first layer reads its feature rows from the table itself: no x "
        "in the training batches, less memory, slower steps (the Trainer's "
        "aggregate_from_store)",
    )
    train.add_argument(
        "--normalize-features",
        action="store_true",
        help="scale each node's features to sum to one (PyG's NormalizeFeatures)",
    )
    train.add_argument(
        "--eval",
        choices=EVAL_MODES,
        default="auto",
        help="how accuracy is measured: full (the model on the whole graph at once), "
        "layerwise (each layer over all nodes in chunks; not for gcn), sampled (mini-batches "
        "with --fanouts), auto (full up to 5M edges; else sampled when the evaluated nodes are "
        "under 10%% of the graph, as in papers100M, else layerwise when the model allows)",
    )
    train.add_argument(
        "--eval-every",
        type=_at_least(0),
        default=1,
        help="val_acc every N epochs and at the last; 0: never evaluate",
    )
    train.add_argument(
        "--num-workers",
        type=_at_least(0),
        default=1,
        help="sampling threads (0: load in the training thread)",
    )
    train.add_argument("--checkpoint", help="save every epoch to this file; resume if it exists")
    train.add_argument("--metrics", help="append per-epoch JSON lines to this file")
    _out_of_core_args(train)
    train.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    train.add_argument(
        "--nproc",
        type=_at_least(1),
        default=1,
        help="workers on this machine (torchrun)",
    )
    train.add_argument(
        "--parallel",
        choices=PARALLEL_MODES,
        default="data",
        help="data: every worker a whole model replica, gradients all-reduced; hybrid (P3, "
        "--nproc 2 or more): each worker holds 1/N of the feature columns and the first "
        "layer's weights for them, partial first-layer results are summed at each batch's "
        "worker, the later layers run data-parallel (sage, gcn, gin; sampled evaluation)",
    )
    train.add_argument(
        "--partitions",
        metavar="DIR",
        help="train on a partition ('graphengine partition'): one worker per part, each "
        "holding only its part and fetching the rest from the others (--nproc K on one "
        "machine, or torchrun across machines); --dataset and --root are not used",
    )
    train.add_argument(
        "--remote-cache",
        type=_cache_size,
        help="with --partitions: each worker's cache of other parts' feature rows, as rows "
        "(100000), a share of the remote nodes (5%%) or bytes (64MB, 1GiB); chosen by access "
        "frequency over one pre-sampled epoch",
    )
    train.add_argument(
        "--dist-timeout",
        type=_positive_float,
        default=300.0,
        help="seconds a worker waits for the others before failing",
    )
    train.set_defaults(run=_train)

    build = commands.add_parser(
        "build", help="compile the C++/CUDA extension (cached)", formatter_class=_Formatter
    )
    build.add_argument("--verbose", action="store_true", help="show the compiler's output")
    build.set_defaults(run=_build)

    partition = commands.add_parser(
        "partition",
        help="split a dataset into K parts (METIS or random), each owning a range of node ids",
        formatter_class=_Formatter,
    )
    _dataset_args(partition)
    partition.add_argument("--parts", type=_at_least(1), required=True, help="K, the parts")
    partition.add_argument("--out", required=True, help="the partition's directory")
    partition.add_argument(
        "--method",
        choices=PARTITION_METHODS,
        default="metis",
        help="metis: few cut edges, balanced nodes/training nodes/edges (needs ~3.3 GB for "
        "2^20 nodes, 24M edges); random: little memory beyond the graph, most edges cut",
    )
    partition.add_argument("--seed", type=int, default=0, help="seed of the random method")
    partition.add_argument(
        "--force", action="store_true", help="replace a partition already in --out"
    )
    partition.set_defaults(run=_partition)

    generate = commands.add_parser(
        "generate",
        help="write a synthetic dataset to the data root without training",
        description="Generate a synthetic catalog dataset (synthetic-papers straight to disk, "
        "in chunks) and print where it is, its size, the seconds and the peak memory taken.",
        formatter_class=_Formatter,
    )
    generate.add_argument("dataset", help="a synthetic catalog name")
    generate.add_argument("--root", help=ROOT_HELP)
    generate.add_argument("--scale", type=_papers_scale, help="synthetic-papers: 2^S nodes")
    generate.set_defaults(run=_generate)

    convert = commands.add_parser(
        "convert",
        help="convert an OGB dataset's files (as the ogb package lays them out) once",
        description="Convert ogbn-arxiv, ogbn-products or ogbn-papers100M from <root>/ogbn_<name>/ "
        "(raw/ and split/, as the ogb package leaves them) into graphengine's memory-mapped "
        "store <root>/<name>/, streaming (bounded memory); print the seconds and peak memory.",
        formatter_class=_Formatter,
    )
    convert.add_argument("dataset", choices=sorted(OGB), help="the OGB dataset")
    convert.add_argument("--root", help=ROOT_HELP)
    convert.add_argument("--force", action="store_true", help="convert again over a store")
    convert.set_defaults(run=_convert)

    reorder = commands.add_parser(
        "reorder",
        help="write a dataset renumbered for locality on disk (hot nodes first)",
        description="Write --dataset renumbered by --order into --out (a store that --dataset "
        "OUT opens, memory-mapped, with order.npy: the original id of each node), streaming; "
        "print the seconds and peak memory.",
        formatter_class=_Formatter,
    )
    _dataset_args(reorder)
    reorder.add_argument("--out", required=True, help="the new store's folder")
    reorder.add_argument(
        "--order", choices=ORDERS, default="degree", help="in-degree, highest first"
    )
    reorder.set_defaults(run=_reorder)

    datasets = commands.add_parser(
        "datasets",
        help="list the catalog, what is on disk and the .npz files in the root",
        formatter_class=_Formatter,
    )
    datasets.add_argument("--root", help=ROOT_HELP)
    datasets.set_defaults(run=_datasets)

    bench = commands.add_parser(
        "bench", help="benchmarks: a table, then one JSON line", formatter_class=_Formatter
    )
    benches = bench.add_subparsers(dest="bench", required=True, metavar="BENCH")

    def add_bench(name: str, help: str) -> argparse.ArgumentParser:
        return benches.add_parser(name, help=help, formatter_class=_Formatter)

    sample = add_bench("sample", "the node, link, Cluster-GCN and GraphSAINT loaders, vs PyG, DGL")
    _dataset_args(sample, default="synthetic-products")
    sample.add_argument(
        "--loader",
        choices=["node", "link", "cluster", "saint"],
        default="node",
        help="NeighborLoader; LinkNeighborLoader (binary negatives, one per seed edge); "
        "ClusterData + ClusterLoader (METIS time reported apart); GraphSAINT's samplers",
    )
    sample.add_argument(
        "--fanouts", type=_fanouts, default=[15, 10, 5], help=f"{FANOUTS_HELP} (node, link)"
    )
    sample.add_argument(
        "--batch-size",
        type=_at_least(1),
        default=1024,
        help="seeds per batch: nodes (node), seed edges (link), walk roots or node/edge draws "
        "(saint)",
    )
    sample.add_argument("--batches", type=_at_least(1), default=20, help="batches timed")
    sample.add_argument("--threads", type=_at_least(1), default=1, help="sampling threads")
    sample.add_argument("--parts", type=_at_least(1), default=1500, help="METIS clusters (cluster)")
    sample.add_argument(
        "--clusters-per-batch", type=_at_least(1), default=20, help="clusters per batch (cluster)"
    )
    sample.add_argument(
        "--saint-mode",
        choices=["walk", "node", "edge"],
        default="walk",
        help="GraphSAINT's random-walk, node or edge sampler (saint)",
    )
    sample.add_argument(
        "--walk-length", type=_at_least(0), default=2, help="steps per walk (saint, walk)"
    )
    sample.add_argument(
        "--vs",
        nargs="+",
        choices=["dgl", "pyg"],
        default=[],
        help="also time PyG's namesake loaders, where its backend runs them, and/or DGL 2.1's "
        "(benchmark only: put the directory ../shared/tools/install-dgl.sh prints on "
        "PYTHONPATH); a peer that cannot run gets a row saying why",
    )
    sample.set_defaults(run=_bench_sample)
    modes = add_bench("modes", "weighted, temporal, heterogeneous and LABOR sampling, vs DGL")
    _dataset_args(modes, default="synthetic-products")
    modes.add_argument("--fanouts", type=_fanouts, default=[15, 10, 5], help=FANOUTS_HELP)
    modes.add_argument("--batch-size", type=_at_least(1), default=1024, help="seeds per batch")
    modes.add_argument("--batches", type=_at_least(1), default=20, help="batches timed")
    modes.add_argument("--threads", type=_at_least(1), default=1, help="sampling threads")
    modes.add_argument(
        "--vs",
        nargs="+",
        choices=["dgl", "pyg"],
        default=[],
        help="also time DGL 2.1's samplers (benchmark only: put the directory "
        "../shared/tools/install-dgl.sh prints on PYTHONPATH) and/or PyG's, where its backend "
        "samples the mode",
    )
    modes.set_defaults(run=_bench_modes)
    train_bench = add_bench("train", "end-to-end training steps, vs PyG's and DGL's loops")
    _dataset_args(train_bench, default="synthetic-products")
    train_bench.add_argument(
        "--model",
        choices=["sage", "gat", "gcn"],
        default="sage",
        help="the GNN: PyG's GraphSAGE, GAT (4 heads) or GCN, against DGL's SAGEConv, GATConv "
        "or GraphConv",
    )
    train_bench.add_argument("--fanouts", type=_fanouts, default=[15, 10, 5], help=FANOUTS_HELP)
    _out_of_core_args(train_bench)
    train_bench.add_argument(
        "--variants",
        choices=["all", "cli"],
        default="all",
        help="graphengine's rows: as its CLI runs it, as a library user, with the host cache "
        "off (all), or the first only (cli: e.g. a store read from disk)",
    )
    train_bench.add_argument(
        "--batch-size", type=_at_least(1), default=1024, help="seeds per batch"
    )
    train_bench.add_argument("--hidden", type=_at_least(1), default=256, help="hidden channels")
    train_bench.add_argument("--batches", type=_at_least(1), default=5, help="steps timed")
    train_bench.add_argument("--threads", type=_at_least(1), default=2, help="sampling threads")
    train_bench.add_argument(
        "--epochs", type=_at_least(0), default=0, help="also train E epochs for accuracy"
    )
    train_bench.add_argument(
        "--vs",
        nargs="+",
        choices=["dgl", "pyg"],
        default=[],
        help="also time PyG's NeighborLoader loop and/or DGL 2.1's own (its DataLoader and "
        "SAGEConv on blocks; benchmark only: put the directory ../shared/tools/install-dgl.sh "
        "prints on PYTHONPATH); a peer that cannot run gets a row saying why",
    )
    train_bench.add_argument(
        "--rounds",
        type=_at_least(1),
        default=1,
        help="rounds of one fresh process per library, alternating; medians are reported",
    )
    train_bench.add_argument(
        "--tune-peers",
        action="store_true",
        help="run PyG's and DGL's processes with graphengine's allocator tuning too (both "
        "tuned), instead of glibc's defaults (as their users run them)",
    )
    train_bench.add_argument(
        "--profile",
        type=_at_least(0),
        default=0,
        metavar="STEPS",
        help="also profile this many of graphengine's steps (compute only, in its first "
        "process): seconds in dense matrix products, aggregation, elementwise passes and the "
        "rest, and the step over its dense products",
    )
    train_bench.add_argument(
        "--precision",
        choices=("fp32", "bf16"),
        default="fp32",
        help="graphengine's training steps in float32 or under autocast to bfloat16 (the peers "
        "run float32)",
    )
    train_bench.add_argument(
        "--forward",
        choices=FORWARDS,
        default="auto",
        help="how graphengine's Trainer runs the model on a batch (auto: blocks)",
    )
    train_bench.add_argument(
        "--device",
        default="cpu",
        help="where the models train (e.g. cuda); loading stays on the CPU",
    )
    train_bench.add_argument(
        "--nproc",
        type=_at_least(1),
        default=1,
        help="instead: epochs of graphengine train with 1..N data-parallel workers",
    )
    train_bench.add_argument(
        "--parallel",
        choices=PARALLEL_MODES,
        default="data",
        help="hybrid (with --nproc N >= 2): --parallel hybrid against --parallel data for each "
        "of --widths and --hiddens, with a projection to 8 and 16 workers",
    )
    train_bench.add_argument(
        "--widths",
        type=_ints,
        default=[100, 512, 1024],
        help="with --parallel hybrid: feature widths (synthetic datasets generated as NAME-xF)",
    )
    train_bench.add_argument(
        "--hiddens", type=_ints, default=[64, 256], help="with --parallel hybrid: hidden widths"
    )
    train_bench.add_argument(
        "--steps",
        type=_at_least(1),
        default=20,
        help="with --parallel hybrid: global batches per epoch (one warm-up epoch, one timed)",
    )
    train_bench.add_argument(
        "--link-gbps",
        type=_positive_float,
        default=10.0,
        help="with --parallel hybrid: the network link the projection assumes, Gb/s",
    )
    train_bench.set_defaults(run=_bench_train)
    part_bench = add_bench(
        "partition", "partitioning: its cost, cross-part traffic and cache hit rates"
    )
    _dataset_args(part_bench, default="synthetic-products")
    part_bench.add_argument("--parts", type=_ints, default=[2, 4], help="K measured (processes)")
    part_bench.add_argument(
        "--methods", type=_methods, default=["metis", "random"], help="partitioning methods"
    )
    part_bench.add_argument("--fanouts", type=_fanouts, default=[15, 10, 5], help=FANOUTS_HELP)
    part_bench.add_argument(
        "--batch-size", type=_at_least(1), default=1024, help="the global batch, split over K"
    )
    part_bench.add_argument("--batches", type=_at_least(1), default=10, help="batches timed")
    part_bench.add_argument(
        "--cache",
        type=lambda text: [_cache_size(t) for t in text.split(",")],
        default=["0", "5%", "20%"],
        help="remote-row cache sizes, comma-separated (rows, N%% of the remote rows, or bytes)",
    )
    part_bench.add_argument(
        "--simulate", type=_ints, default=[8, 16, 32, 64], help="K simulated (no processes)"
    )
    part_bench.add_argument(
        "--simulated-batches", type=_at_least(1), default=200, help="global batches simulated"
    )
    part_bench.set_defaults(run=_bench_partition)
    convert_bench = add_bench("convert", "graphengine convert on OGB-format files of products size")
    convert_bench.add_argument(
        "--root", help="where the OGB-format files go (default: <data root>/bench-ogb)"
    )
    convert_bench.add_argument("--nodes", type=_at_least(1), default=2_449_029, help="nodes")
    convert_bench.add_argument("--edges", type=_at_least(0), default=61_859_140, help="edges")
    convert_bench.add_argument("--features", type=_at_least(1), default=100, help="features")
    convert_bench.set_defaults(run=_bench_convert)
    gather = add_bench("gather", "feature-row gathers vs copy bandwidth")
    gather.add_argument("--table-mib", type=_at_least(1), default=1024, help="table size")
    gather.add_argument("--cols", type=_at_least(1), default=128, help="float32 columns")
    gather.add_argument("--ids", type=_at_least(1), default=200_000, help="rows per gather")
    gather.add_argument("--repeats", type=_at_least(1), default=10, help="gathers timed")
    gather.add_argument("--threads", type=_at_least(1), default=1, help="gather threads")
    gather.set_defaults(run=_bench_gather)
    scaling = add_bench("scaling", "sampling cost per edge as the graph grows")
    scaling.add_argument(
        "--log2-nodes", type=_ints, default=[16, 18, 20, 22], help="graph sizes, as log2(nodes)"
    )
    scaling.add_argument("--fanouts", type=_fanouts, default=[15, 10, 5], help=FANOUTS_HELP)
    scaling.add_argument("--batch-size", type=_at_least(1), default=1024, help="seeds per batch")
    scaling.add_argument("--batches", type=_at_least(1), default=20, help="batches timed")
    scaling.add_argument("--threads", type=_at_least(1), default=1, help="sampling threads")
    scaling.set_defaults(run=_bench_scaling)
    return parser


def _dataset_args(parser: argparse.ArgumentParser, default: str = "synthetic-small") -> None:
    parser.add_argument(
        "--dataset",
        default=default,
        help=f"a catalog name ({', '.join(CATALOG)}) or the path of a gnn-benchmark .npz file",
    )
    parser.add_argument("--root", help=ROOT_HELP)
    parser.add_argument(
        "--scale",
        type=_papers_scale,
        help=f"synthetic-papers' size: 2^S nodes (default {PAPERS_SCALE}); its store is "
        "generated on first use (disk: about 600 bytes a node)",
    )


def _out_of_core_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--feature-cache",
        type=_cache_size,
        help="keep the feature rows of the highest in-degree nodes in memory (rows, a share "
        "of the nodes like 5%%, or bytes like 2GiB), for a store read from disk",
    )
    parser.add_argument(
        "--access",
        choices=ACCESS,
        help="tell the kernel how the memory-mapped features and graph are read: random "
        "turns off read-ahead (a fault reads its page, not 128 KiB around it) and reads each "
        "batch's feature rows at once; for a store larger than memory",
    )


def _papers_scale(text: str) -> int:
    try:
        scale = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer (got {text!r})") from None
    if not 10 <= scale <= MAX_SCALE:
        raise argparse.ArgumentTypeError(f"must be in [10, {MAX_SCALE}] (got {scale})")
    return scale


def _ints(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated ints (got {text!r})") from None


def _at_least(low: int):
    """An argparse type: an int >= ``low``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer (got {text!r})") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low} (got {value})")
        return value

    return parse


def _float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number (got {text!r})") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number (got {text!r})")
    return value


def _positive_float(text: str) -> float:
    value = _float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0 (got {value})")
    return value


def _nonnegative_float(text: str) -> float:
    value = _float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0 (got {value})")
    return value


def _dropout(text: str) -> float:
    value = _float(text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"must be in [0, 1) (got {value})")
    return value


def _fanouts(text: str) -> list[int]:
    values = _ints(text)
    if any(v < -1 for v in values):
        raise argparse.ArgumentTypeError(f"fanouts must be >= -1 (got {text!r})")
    return values


def _train(args) -> int:
    from graphengine.datasets import load_hetero_dataset

    _check_task_options(args)
    if args.task == "link":
        return _train_link(args)
    from graphengine.distributed.data import DistData
    from graphengine.nn.models import build_model
    from graphengine.runtime import tune_host_allocator
    from graphengine.train.trainer import Trainer, split_batch

    hetero = args.partitions is None and is_heterogeneous(args.dataset)
    if args.partitions is not None:
        _check_partition_workers(args.partitions, args.nproc)
    if args.remote_cache is not None and args.partitions is None:
        raise ValueError("--remote-cache needs --partitions")
    if args.feature_cache is not None and (args.task == "link" or args.partitions is not None):
        raise ValueError("--feature-cache caches an unpartitioned graph's features for --task node")
    if args.features is not None and args.partitions is not None:
        raise ValueError("--features generates a dataset; a partition keeps its own features")
    workers = int(os.environ["WORLD_SIZE"]) if distributed.launched_by_torchrun() else args.nproc
    if hetero:
        _check_hetero_options(args, workers)
    if args.parallel == "hybrid" and workers < 2:
        raise ValueError(f"--parallel hybrid needs 2 or more workers (got --nproc {workers})")
    if args.parallel == "hybrid" and args.partitions is not None:
        raise ValueError(
            "--parallel hybrid on --partitions is not available yet: use --parallel data"
        )
    if args.parallel == "hybrid" and args.eval in ("full", "layerwise"):
        raise ValueError(
            f"--parallel hybrid evaluates sampled mini-batches, not --eval {args.eval}"
        )
    launch = args.nproc > 1 or args.partitions is not None  # parts talk through a group
    if launch and not distributed.launched_by_torchrun():
        split_batch(args.batch_size, args.worker_batch_size, args.nproc)  # before the workers
        return distributed.launch(args.nproc, _without_nproc(args.argv))
    tune_host_allocator()
    rank, world_size = 0, 1
    device = torch.device("cpu")
    if distributed.launched_by_torchrun():
        rank, world_size = distributed.join(args.dist_timeout)
        device = distributed.local_device()
    saved = {"epoch": None}  # the epoch of the checkpoint on disk, once known
    try:
        torch.manual_seed(args.seed)
        if args.partitions is not None:
            dataset = DistData.open(args.partitions, device=device)
        elif hetero:
            dataset = load_hetero_dataset(args.dataset, root=args.root)
        else:
            dataset = _homogeneous_dataset(args, world_size)
        log.info("%s", dataset)
        model = build_model(
            args.model,
            dataset.num_features,
            args.hidden,
            dataset.num_classes,
            num_layers=len(args.fanouts),
            dropout=args.dropout,
            metadata=dataset.metadata() if hetero else None,
        )
        trainer = Trainer(
            model,
            dataset,
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
            parallel=args.parallel,
            sampler=_sampler(args),
            precision=args.precision,
            feature_cache=args.feature_cache,
            bf16_features=not args.no_bf16_features,
            aggregate_from_store=args.aggregate_from_store,
        )
        if trainer.epoch > 0:
            saved["epoch"] = trainer.epoch

        def on_epoch(metrics: dict) -> None:
            if args.checkpoint is not None:
                saved["epoch"] = metrics["epoch"]  # fit saved it before calling this
            _print_json(metrics)

        history = trainer.fit(args.epochs, eval_every=args.eval_every, on_epoch=on_epoch)
        accuracies = trainer.evaluate_all() if args.eval_every > 0 else {}  # every rank
    except KeyboardInterrupt:
        if rank == 0:
            _log_interrupted(args.checkpoint, saved["epoch"])
        code = INTERRUPTED
    except USER_ERRORS as error:
        if world_size == 1:
            raise
        log.error("rank %d: %s", rank, error)
        code = 2
    else:
        if rank == 0:
            _print_json(_result(args, dataset.name, trainer.epoch, world_size, history, accuracies))
        code = 0
    if world_size > 1:
        # A worker that stops early cannot wait for the others at a barrier.
        distributed.finish(code, wait=code == 0)
    return code


def _check_task_options(args) -> None:
    """Refuse, before anything is loaded, options that the task or the sampler do not take."""
    link_only = [name for name, default in (("decoder", "dot"),) if getattr(args, name) != default]
    if args.task != "link" and link_only:
        raise ValueError(f"--{link_only[0]} is an option of --task link")
    if args.task == "link" and args.precision != "fp32":
        raise ValueError(f"--precision {args.precision} trains node classification for now")
    subgraph = args.sampler in ("cluster", "saint")
    if args.task == "link" and args.eval == "sampled":
        raise ValueError(
            "--task link evaluates on every node's embedding: --eval full, layerwise or auto"
        )
    if args.task == "link" and args.sampler != "neighbor":
        raise ValueError(f"--sampler {args.sampler} chooses node classification's batches")
    if args.task == "link" or subgraph:
        what = "--task link" if args.task == "link" else f"--sampler {args.sampler}"
        for option, value in (
            ("--nproc", args.nproc > 1 or distributed.launched_by_torchrun()),
            ("--partitions", args.partitions is not None),
            ("--parallel hybrid", args.parallel == "hybrid"),
            ("--checkpoint", args.checkpoint is not None),
            ("--remote-cache", args.remote_cache is not None),
        ):
            if value:
                raise ValueError(f"{what} trains in one process without {option} for now")
    if args.partitions is None and is_heterogeneous(args.dataset) and args.sampler != "neighbor":
        raise ValueError(
            f"--sampler {args.sampler} trains homogeneous datasets; {args.dataset} is heterogeneous"
        )
    if args.normalize_features and args.partitions is not None:
        raise ValueError("--normalize-features changes a dataset; a partition keeps its own")
    if args.normalize_features and args.partitions is None and is_heterogeneous(args.dataset):
        raise ValueError(
            f"--normalize-features scales a homogeneous dataset's features; {args.dataset} is "
            "heterogeneous"
        )
    if args.task == "link" and args.partitions is None and is_heterogeneous(args.dataset):
        raise ValueError(
            f"--task link trains on homogeneous datasets; {args.dataset} is heterogeneous"
        )
    for sampler, options in (
        ("cluster", ("num_parts", "cluster_dir", "clusters_per_batch")),
        ("saint", ("walk_length",)),
    ):
        given = [o for o in options if getattr(args, o) is not None]
        if given and args.sampler != sampler:
            option = "--" + given[0].replace("_", "-")
            raise ValueError(f"{option} is an option of --sampler {sampler}")


def _sampler(args):
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


def _train_link(args) -> int:
    """``train --task link``: one process; the final line holds every split's metrics."""
    from graphengine.nn.decoders import build_decoder
    from graphengine.nn.models import build_model
    from graphengine.train.link import LinkTrainer

    torch.manual_seed(args.seed)
    dataset = _homogeneous_dataset(args, 1)
    log.info("%s", dataset)
    encoder = build_model(
        args.model,
        dataset.num_features,
        args.hidden,
        args.hidden,
        num_layers=len(args.fanouts),
        dropout=args.dropout,
    )
    trainer = LinkTrainer(
        encoder,
        build_decoder(args.decoder, args.hidden),
        dataset,
        fanouts=args.fanouts,
        batch_size=args.batch_size,
        lr=args.lr,
        weight_decay=args.weight_decay,
        seed=args.seed,
        eval_mode=args.eval,
        num_workers=args.num_workers,
        metrics_path=args.metrics,
        progress=not args.no_progress and sys.stderr.isatty(),
    )
    try:
        history = trainer.fit(args.epochs, eval_every=args.eval_every, on_epoch=_print_json)
        metrics = trainer.evaluate_all() if args.eval_every > 0 else {}
    except KeyboardInterrupt:
        return INTERRUPTED
    _print_json(
        {
            "task": "link",
            "dataset": dataset.name,
            "model": args.model,
            "decoder": args.decoder,
            "epochs": trainer.epoch,
            "train_edges": int(trainer.split.train.edge_label_index.size(1)),
            **metrics,
            **_epoch_seconds(history),
        }
    )
    return 0


def _check_hetero_options(args, workers: int) -> None:
    """Refuse, before the dataset is generated, what heterogeneous datasets do not train
    with: several workers, --parallel hybrid, --features, full or layer-wise evaluation,
    models other than sage."""
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


def _check_partition_workers(path: str, nproc: int) -> None:
    """Raise unless ``path`` is a partition with one part per worker (under torchrun, the
    group's size; else ``nproc``)."""
    from graphengine.data.partition import load_partition

    parts = load_partition(path, verify=False).num_parts
    workers = int(os.environ["WORLD_SIZE"]) if distributed.launched_by_torchrun() else nproc
    if parts != workers:
        raise ValueError(
            f"--partitions '{path}' has {parts} parts: train it with one worker per part "
            f"(--nproc {parts}), not {workers}"
        )


def _cache_size(text: str) -> int | str:
    from graphengine.distributed.features import cache_rows

    try:
        cache_rows(text, 1, 1)  # checks the form
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return int(text) if text.strip().isdigit() else text


def _result(args, dataset: str, epochs: int, workers: int, history: list, accuracies: dict):
    """The final JSON line of ``train`` (its fields are described in TRAIN_EPILOG)."""
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
        **_epoch_seconds(history),
    }


def _epoch_seconds(history: list[dict]) -> dict:
    """``first_epoch_s`` (it includes compiling the Numba kernels) and ``epoch_s``, the mean
    of the later epochs (of the first when only one ran), of ``history``'s metrics."""
    times = [m["epoch_s"] for m in history]
    later = times[1:] or times
    return {
        "first_epoch_s": times[0] if times else None,
        "epoch_s": sum(later) / len(later) if later else None,
    }


def _print_json(record: dict) -> None:
    """``record`` as one JSON line on stdout, flushed so that a reader sees it at once."""
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


def _log_interrupted(checkpoint: str | None, epoch: int | None) -> None:
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


def _build(args) -> int:
    from graphengine import ops

    if not ops.build_extension(verbose=args.verbose):
        log.error("the extension did not build: %s\n%s", ops.build_error(), ops.INSTALL_HINT)
        return 1
    kernels = "CPU and CUDA" if ops.with_cuda() else "CPU only (this torch has no CUDA)"
    result = {
        "extension": "built",
        "kernels": kernels,
        "library": ops.library_path(),
        "sources": str(ops.sources_dir()),
        "torch": torch.__version__,
    }
    print(json.dumps(result))
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


def _homogeneous_dataset(args, world_size: int):
    """``--dataset`` (generated once per machine), its features scaled with
    ``--normalize-features``."""
    dataset = _load_once_per_machine(args.dataset, args.root, world_size, args.features)
    if args.access is not None:
        log.info("advised %s access to %s", args.access, ", ".join(dataset.advise(args.access)))
    return dataset.normalize_features() if args.normalize_features else dataset


def _load_once_per_machine(
    name: str, root: str | None, world_size: int, num_features: int | None = None
):
    """Local rank 0 loads (and generates, for a synthetic dataset) first; the other workers
    then open the same memory-mapped files, so the machine holds one copy."""
    from graphengine.datasets import load_dataset

    if world_size == 1:
        return load_dataset(name, root=root, num_features=num_features)
    first = int(os.environ.get("LOCAL_RANK", 0)) == 0
    dataset = load_dataset(name, root=root, num_features=num_features) if first else None
    torch.distributed.barrier()
    return dataset if first else load_dataset(name, root=root, num_features=num_features)


def _partition(args) -> int:
    from graphengine.data.partition import partition_dataset
    from graphengine.datasets import load_dataset

    stats = partition_dataset(
        load_dataset(args.dataset, root=args.root),
        args.parts,
        args.out,
        method=args.method,
        force=args.force,
        seed=args.seed,
    )
    _print_json({"dataset": args.dataset, "method": args.method, **stats})
    return 0


def _convert(args) -> int:
    from graphengine.datasets import default_root
    from graphengine.datasets.catalog import load_ogb

    root = Path(args.root) if args.root else default_root()
    store = CATALOG[args.dataset].location(root)
    if store.exists() and not args.force:
        raise ValueError(f"'{store}' exists; pass --force to convert {args.dataset} again")
    if store.exists():
        shutil.rmtree(store)
    start = time.perf_counter()
    dataset = load_ogb(args.dataset, root, progress=True)
    _report_store(args.dataset, store, dataset, time.perf_counter() - start)
    return 0


def _reorder(args) -> int:
    from graphengine.datasets import load_dataset
    from graphengine.datasets.reorder import reorder_dataset

    out = Path(args.out)
    if out.exists():
        raise ValueError(f"'{out}' exists; remove it or pick another --out")
    start = time.perf_counter()
    dataset = reorder_dataset(load_dataset(args.dataset, root=args.root), out, args.order, True)
    _report_store(str(out), out, dataset, time.perf_counter() - start)
    return 0


def _report_store(name: str, path: Path, dataset, seconds: float) -> None:
    """The table and JSON line of ``generate``, ``convert`` and ``reorder`` (the peak
    resident memory counts the store's pages its final check mapped)."""
    from graphengine.bench.report import print_report

    size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9  # KiB on Linux
    rows = [[name, str(path), f"{size / 1e9:.2f}", f"{seconds:.1f}", f"{peak:.2f}"]]
    summary = {"dataset": name, "path": str(path), "bytes": size, "seconds": seconds}
    summary |= {"peak_rss_gb": peak, "repr": repr(dataset)}
    print_report(["dataset", "path", "GB on disk", "seconds", "peak RSS GB"], rows, summary)


def _generate(args) -> int:
    from graphengine.datasets import (
        default_root,
        is_heterogeneous,
        load_dataset,
        load_hetero_dataset,
    )
    from graphengine.datasets.catalog import SYNTHETIC, load_papers, papers_scale

    root = Path(args.root) if args.root else default_root()
    scale = papers_scale(args.dataset)
    if scale is None and args.dataset not in SYNTHETIC and not is_heterogeneous(args.dataset):
        synthetic = [n for n, e in CATALOG.items() if e.kind.startswith("synthetic")]
        raise ValueError(f"generate makes a synthetic dataset ({synthetic}); got {args.dataset!r}")
    start = time.perf_counter()
    if scale is not None:
        dataset = load_papers(root, scale, progress=True)
    elif is_heterogeneous(args.dataset):
        dataset = load_hetero_dataset(args.dataset, root)
    else:
        dataset = load_dataset(args.dataset, root)
    path = root / (store_name(scale) if scale is not None else args.dataset)
    _report_store(args.dataset, path, dataset, time.perf_counter() - start)
    return 0


def _datasets(args) -> int:
    from graphengine.bench.report import print_report
    from graphengine.datasets import default_root, is_available

    root = Path(args.root) if args.root else default_root()
    rows = [
        [name, entry.kind, "yes" if is_available(name, root) else "no", entry.description]
        for name, entry in CATALOG.items()
    ]
    known = {entry.location(root) for entry in CATALOG.values()}
    files = sorted(p for p in root.glob("*.npz") if p not in known) if root.is_dir() else []
    rows += [[str(p), "npz file", "yes", "load with --dataset PATH"] for p in files]
    papers = sorted(p.name for p in root.glob("synthetic-papers-s*")) if root.is_dir() else []
    rows += [[name, "synthetic-papers", "yes", "--dataset " + name] for name in papers]
    summary = {
        "root": str(root),
        "on_disk": [r[0] for r in rows if r[2] == "yes" and r[1] != "npz file"],
        "npz_files": [str(p) for p in files],
    }
    print_report(["name", "kind", "on disk", "description"], rows, summary)
    return 0


def _bench_convert(args) -> int:
    from graphengine.bench import convert
    from graphengine.datasets import default_root

    root = Path(args.root) if args.root else default_root() / "bench-ogb"
    convert.run(root, args.nodes, args.edges, args.features)
    return 0


def _bench_sample(args) -> int:
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
        )
        return 0
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
    )
    return 0


def _bench_modes(args) -> int:
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


def _bench_partition(args) -> int:
    from graphengine.bench import partition

    partition.run(
        args.dataset,
        args.root,
        args.parts,
        args.methods,
        args.fanouts,
        args.batch_size,
        args.batches,
        [str(size) for size in args.cache],
        args.simulate,
        args.simulated_batches,
    )
    return 0


def _methods(text: str) -> list[str]:
    methods = [m.strip() for m in text.split(",") if m.strip()]
    unknown = [m for m in methods if m not in PARTITION_METHODS]
    if not methods or unknown:
        raise argparse.ArgumentTypeError(
            f"methods must be among {', '.join(PARTITION_METHODS)} (got {text!r})"
        )
    return methods


def _bench_train(args) -> int:
    from graphengine.bench import parallel, train

    if args.parallel == "hybrid":
        if args.nproc < 2:
            raise ValueError(f"--parallel hybrid needs --nproc 2 or more (got {args.nproc})")
        parallel.run(
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
        rounds=args.rounds,
        tune_peers=args.tune_peers,
        precision=args.precision,
        profile=args.profile,
        model=args.model,
        access=args.access,
        feature_cache=args.feature_cache,
        variants=args.variants,
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
