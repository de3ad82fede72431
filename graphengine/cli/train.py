"""``graphengine train``: node classification (:mod:`.train_node`) or link prediction
(:mod:`.train_link`) on a dataset; the options are declared here and checked in
:mod:`.train_checks`."""

from __future__ import annotations

import argparse

from graphengine.nn.decoders import DECODERS
from graphengine.train.evaluate import EVAL_MODES
from graphengine.train.subgraph import SAMPLERS

from . import options, values
from .train_checks import check_task_options

TASKS = ("node", "link")
MODELS = ["sage", "gcn", "gin", "gat"]

DESCRIPTION = (
    "Train a GNN for node classification on sampled mini-batches. A heterogeneous dataset "
    "(synthetic-hetero) trains PyG's to_hetero GraphSAGE (--model sage) on its papers, in one "
    "process, evaluated on sampled mini-batches. With --task link, train the GNN as an encoder "
    "of a link predictor instead (see --task)."
)

EPILOG = """\
output (--task node): one JSON line per epoch on stdout as it ends (epoch, loss,
train_acc: the running accuracy on that epoch's training batches, val_acc, epoch_s,
seeds_per_s, stage_s; with --partitions also partition: rows, bytes and edges that crossed
parts, cut_edge_share, cache_hit_rate (--parallel data), seconds in exchanges; traffic, all
workers together: feature_bytes read into batches, gradient_bytes all-reduced, moved_bytes
sent between workers, and with --parallel hybrid the first layers' structure_sent_bytes and
partial_sent_bytes and exchange_seconds_per_worker; with --plan auto plan: the choice and
its predicted epoch), then a final JSON line: dataset,
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
Every line is valid JSON: a value that is not a finite number is null. Logs and the
progress bar go to stderr. Ctrl-C stops after logging where the last checkpoint is (exit
code 130). Exit code 2: bad options or input, checked before training where they can be,
and a training loss that is not finite (NaN or inf features, too high --lr): training stops
at that step, naming its epoch and step, without a metrics line or checkpoint for that
epoch. Exit code 3: a worker
of several stopped answering (stopped, killed, its host or link down): every other worker
fails within --dist-timeout and a few seconds, naming the lost worker's rank, address and
process id (torchrun's "Root Cause" quotes it); with --nproc, a worker that a signal ended
(killed, out of memory, crashed) is named with the signal as soon as it ends. With --nproc,
the exit code is that of the first worker to fail (2 or 3 as above, 1 for a traceback), and
130 when the launcher is interrupted (SIGINT, SIGTERM: the workers are stopped too); a
worker whose launcher was killed stops within seconds. With --max-restarts K, torchrun
restarts every worker when one fails, up to K times, and they resume from --checkpoint; the
exit code is then the last attempt's."""


def add_parser(commands) -> None:
    train = options.add_command(
        commands,
        "train",
        "node classification or link prediction on a dataset",
        description=DESCRIPTION,
        epilog=EPILOG,
    )
    options.add_dataset(train, heterogeneous=True)
    _add_model_options(train)
    _add_task_options(train)
    _add_feature_options(train)
    _add_evaluation_options(train)
    options.add_out_of_core(train)
    train.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    train.add_argument(
        "--device",
        type=values.device,
        default="auto",
        help="where the model trains: auto (a GPU where torch finds one: cuda:0 in one "
        "process, each worker's cuda:LOCAL_RANK under --nproc or torchrun; else the CPU), cpu, "
        "cuda (the same GPUs as auto, or an error naming why there is none) or cuda:N (one "
        "process)",
    )
    _add_distributed_options(train)
    train.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Check the options against each other, then train; returns the exit code."""
    from .train_link import train_link
    from .train_node import train_node

    check_task_options(args)
    return train_link(args) if args.task == "link" else train_node(args)


def _add_model_options(train: argparse.ArgumentParser) -> None:
    """The features, the model, its sampling and its optimizer."""
    train.add_argument(
        "--features",
        type=values.at_least(1),
        help="a synthetic dataset generated with this many feature columns (cached as "
        "NAME-xF: the same graph, other features and splits)",
    )
    options.add_model(train, MODELS, help="the GNN")
    options.add_fanouts(train)
    options.add_batch_size(
        train,
        help="seeds per training step, all workers together: with --nproc N each worker takes "
        "a 1/N share of every step (a multiple of N), so an epoch has as many steps as on one",
    )
    train.add_argument(
        "--worker-batch-size",
        type=values.at_least(1),
        help="instead of --batch-size: seeds per step for each worker (N times fewer steps)",
    )
    train.add_argument(
        "--epochs", type=values.at_least(1), default=3, help="epochs in total (resumed ones count)"
    )
    options.add_hidden(train, default=128)
    train.add_argument(
        "--lr", type=values.positive_float, default=0.003, help="Adam's learning rate"
    )
    train.add_argument(
        "--weight-decay", type=values.nonnegative_float, default=0.0, help="Adam's weight decay"
    )
    train.add_argument(
        "--dropout",
        type=values.probability_below_one,
        default=0.5,
        help="dropout probability, in [0, 1)",
    )
    train.add_argument(
        "--seed", type=values.seed, default=0, help="seeds the weights and the batches"
    )


def _add_task_options(train: argparse.ArgumentParser) -> None:
    """The task, the link decoder and the training batches' sampler."""
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
        type=values.at_least(1),
        help="--sampler cluster: METIS clusters (default: one per 1000 nodes)",
    )
    options.add_clusters_per_batch(train, help="--sampler cluster: clusters a batch (default: 20)")
    train.add_argument(
        "--cluster-dir",
        help="--sampler cluster: a directory to cache the clusters in (a writable one)",
    )
    options.add_walk_length(train, help="--sampler saint: steps per walk (default: 2)")


def _add_feature_options(train: argparse.ArgumentParser) -> None:
    """The precision of the steps and where the first layer reads its feature rows."""
    options.add_precision(
        train,
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


def _add_evaluation_options(train: argparse.ArgumentParser) -> None:
    """Evaluation, the loading threads, the checkpoint and the metrics file."""
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
        type=values.at_least(0),
        default=1,
        help="val_acc every N epochs and at the last; 0: never evaluate",
    )
    train.add_argument(
        "--num-workers",
        type=values.between(0, values.MAX_THREADS),
        default=1,
        help=f"sampling threads, at most {values.MAX_THREADS} (0: load in the training thread)",
    )
    train.add_argument("--checkpoint", help="save every epoch to this file; resume if it exists")
    train.add_argument("--metrics", help="append per-epoch JSON lines to this file")


def _add_distributed_options(train: argparse.ArgumentParser) -> None:
    """The workers, how they share the model, and a partition to train on."""
    options.add_nproc(train, help="workers on this machine (torchrun)")
    train.add_argument(
        "--max-restarts",
        type=values.at_least(0),
        default=0,
        help="with --nproc or --partitions: when a worker fails, stop the others and start "
        "them all again, up to K times (torchrun's --max-restarts); with --checkpoint they "
        "resume from the last epoch saved, else they start afresh",
        metavar="K",
    )
    options.add_parallel(
        train,
        help="data: every worker a whole model replica, gradients all-reduced; hybrid (P3, "
        "--nproc 2 or more): each worker holds 1/N of the feature columns and the first "
        "layer's weights for them, partial first-layer results are summed at each batch's "
        "worker, the later layers run data-parallel (sage, gcn, gin; sampled evaluation); "
        "with --partitions, hybrid as P3 runs: the structure split by parts, the features "
        "by columns (redistributed from the parts' rows by one all-to-all at the start)",
    )
    train.add_argument(
        "--plan",
        choices=("auto",),
        help="auto: let 'graphengine plan' choose --parallel (data or hybrid; with "
        "--partitions, the parts' data or hybrid) by its predicted epoch, probed in the "
        "workers' group before training; every epoch's JSON line then carries plan: the "
        "choice, predicted_epoch_s and its parts, beside the measured epoch_s",
    )
    train.add_argument(
        "--partitions",
        metavar="DIR",
        help="train on a partition ('graphengine partition'): one worker per part, each "
        "holding only its part (--nproc K on one machine, or torchrun across machines) and "
        "sampling across the parts; with --parallel data it fetches other parts' feature "
        "rows from their owners, with --parallel hybrid it holds its feature columns of "
        "every node instead; --dataset and --root are not used",
    )
    train.add_argument(
        "--remote-cache",
        type=values.cache_size,
        help="with --partitions: each worker's cache of other parts' feature rows, as rows "
        "(100000), a share of the remote nodes (5%%) or bytes (64MB, 1GiB); chosen by access "
        "frequency over one pre-sampled epoch",
    )
    options.add_dist_timeout(train)
