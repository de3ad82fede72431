"""What a training run is asked to do: one typed, validated configuration.

The :class:`~graphengine.train.Trainer`, the CLI and the benchmarks all describe a run with a
:class:`TrainConfig`; the factories of :mod:`graphengine.train.batches` build the run's
batches, model wrapper and evaluation from it, so that the training loop itself reads no
option but the schedule's.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import torch

from graphengine.parallel import PARALLEL_MODES
from graphengine.train.evaluate import EVAL_MODES
from graphengine.train.subgraph import SAMPLERS, SubgraphSampling
from samplers import check_fanouts

PRECISIONS = ("fp32", "bf16")
#: ``parallel``: a strategy by name, or ``'auto'``, the planner's choice
#: (:mod:`graphengine.train.planned`).
PARALLEL_CHOICES = (*PARALLEL_MODES, "auto")
#: The forwards of :class:`~graphengine.nn.SeedLogits`; a heterogeneous model runs
#: ``'whole'`` (``'auto'`` too).
FORWARDS = ("auto", "blocks", "trim", "whole")


@dataclass(frozen=True)
class TrainConfig:
    """How to train a node classifier: batches, optimizer, precision, parallelism, outputs.

    Attributes:
        fanouts: neighbors per hop for training (and for sampled evaluation).
        batch_size: seeds per training step, all workers together (the global batch): with
            ``W`` data-parallel workers each takes ``batch_size / W`` seeds of every step, so
            an epoch has as many steps as with one worker. Must be a multiple of ``W``.
        worker_batch_size: instead, the seeds each worker takes per step (the global batch
            is then ``W`` times larger, and an epoch has ``W`` times fewer steps).
        lr, weight_decay: Adam's settings.
        seed: seeds every epoch's batches.
        eval_mode: ``'full'`` (the model on the whole graph at once), ``'layerwise'``
            (each layer over all nodes in chunks, for PyG ``BasicGNN`` models),
            ``'sampled'`` (mini-batches with ``fanouts``) or ``'auto'`` (see
            :func:`~graphengine.train.evaluate.resolve_eval_mode`; always sampled for a
            heterogeneous dataset or hybrid workers).
        num_workers: sampling threads of the loaders (0: load in the training thread).
        forward: how the model runs on a batch (see :class:`~graphengine.nn.SeedLogits`);
            ``'auto'`` picks blocks, else trimming, else the whole batch, as the model allows
            (a heterogeneous dataset's model always runs on the whole batch).
        device: where the model runs; batches are copied there by the loader.
        checkpoint: a file to save after every epoch and to resume from if it exists.
        metrics_path: a file to append one JSON line of metrics per epoch to.
        progress: show a tqdm progress bar.
        parallel: ``'data'`` (every worker a whole model replica) or ``'hybrid'`` (P3: each
            worker holds a range of the feature columns and the first layer's weights for
            them, the later layers data-parallel; 2 or more workers, a PyG ``BasicGNN``
            with a GraphSAGE, GCN or GIN first layer, sampled evaluation), or ``'auto'``:
            the one :mod:`graphengine.plan` predicts fastest here, probed in the process
            group when the Trainer is built (each epoch's metrics then carry the
            prediction, ``plan``). Ignored when the Trainer is given a ``strategy``.
        remote_cache: with a partitioned graph, this worker's cache of remote feature rows:
            rows, a share of the remote nodes (``"5%"``) or bytes (``"64MB"``).
        sampler: the training batches: ``'neighbor'`` (:class:`~graphengine.NeighborLoader`),
            ``'labor'`` (:class:`~graphengine.LaborLoader`, the same fanouts), or subgraphs
            whose training nodes the model learns from, run on the whole subgraph:
            ``'cluster'`` (Cluster-GCN), ``'saint'`` (GraphSAINT random walks) or a
            :class:`~graphengine.train.subgraph.SubgraphSampling` that says how (subgraphs:
            a homogeneous dataset in a single process).
        precision: ``'fp32'``, or ``'bf16'``: training steps under ``torch.autocast`` to
            bfloat16 (matrix products and GraphSAGE's fused layers in bf16, the loss and the
            weights, their gradients and Adam's state in float32). Evaluation computes in
            float32.
        feature_cache: for a :class:`~graphengine.datasets.GraphDataset` trained by the
            neighbor or LABOR loader on the CPU, a host cache of its highest in-degree
            nodes' feature rows, read by the training batches (from a memory-mapped store
            larger than memory, the rows that most batches read stay in memory whatever
            the page cache evicts): rows, a share of the nodes (``"5%"``) or bytes
            (``"2GiB"``). Its hit rate is in each epoch's metrics (``feature_cache``).
        bf16_features: with ``precision='bf16'``, a GraphDataset trained by the neighbor or
            LABOR loader on the CPU (no ``feature_cache``, not ``access='random'``) by a
            model whose first layer casts ``x`` to bfloat16 before anything reads it (a PyG
            GAT, or GraphSAGE's fused mean layer on blocks): the training batches gather
            from a bfloat16 copy of ``x`` in memory, made once when it takes at most a
            quarter of the memory available. The same results with half the bytes to
            gather. ``False`` keeps float32 batches.
        aggregate_from_store: for a GraphDataset in memory (not ``access='random'``) trained
            by the neighbor or LABOR loader on the CPU without ``feature_cache``, by a model
            whose first layer is GraphSAGE's fused mean layer on blocks: the training
            batches carry no ``x``, and that layer reads its rows from the feature table
            itself, by the batch's node ids. Less memory for slower steps: the aggregation
            then reads its rows at random from the whole table instead of from the batch's
            compact copy (see ``docs/benchmarks-archive.md``, issue 15).

    Raises:
        ValueError, TypeError: a field out of its range or of the wrong type, naming it.
    """

    fanouts: tuple[int, ...] = (15, 10, 5)
    batch_size: int = 1024
    worker_batch_size: int | None = None
    lr: float = 0.003
    weight_decay: float = 0.0
    seed: int = 0
    eval_mode: str = "auto"
    num_workers: int = 1
    forward: str = "auto"
    device: str | torch.device = "cpu"
    checkpoint: Path | None = None
    metrics_path: Path | None = None
    progress: bool = True
    parallel: str = "data"
    remote_cache: int | str | None = None
    sampler: str | SubgraphSampling = "neighbor"
    precision: str = "fp32"
    feature_cache: int | str | None = None
    bf16_features: bool = True
    aggregate_from_store: bool = False

    def __post_init__(self):
        self._set("fanouts", check_fanouts(self.fanouts))
        self._set("device", torch.device(self.device))
        for name in ("checkpoint", "metrics_path"):
            if getattr(self, name) is not None:
                self._set(name, Path(getattr(self, name)))
        _check_choice("precision", self.precision, PRECISIONS)
        _check_choice("parallel", self.parallel, PARALLEL_CHOICES)
        _check_choice("eval_mode", self.eval_mode, EVAL_MODES)
        _check_choice("forward", self.forward, FORWARDS)
        if isinstance(self.sampler, str):
            _check_choice("sampler", self.sampler, SAMPLERS)
        elif not isinstance(self.sampler, SubgraphSampling):
            raise TypeError(
                f"'sampler' must be one of {SAMPLERS} or a SubgraphSampling (got {self.sampler!r})"
            )
        if isinstance(self.num_workers, bool) or not isinstance(self.num_workers, int):
            raise TypeError(f"'num_workers' must be an int (got {self.num_workers!r})")
        if self.num_workers < 0:
            raise ValueError(f"'num_workers' must be >= 0 (got {self.num_workers})")

    def _set(self, name: str, value) -> None:
        object.__setattr__(self, name, value)

    @property
    def sampler_kind(self) -> str:
        """The sampler's name (``'neighbor'``, ``'labor'``, ``'cluster'`` or ``'saint'``)."""
        return self.sampler if isinstance(self.sampler, str) else self.sampler.kind

    def replace(self, **changes) -> TrainConfig:
        """A copy with ``changes`` (validated again)."""
        return dataclasses.replace(self, **changes)


def _check_choice(name: str, value, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"'{name}' must be one of {choices} (got {value!r})")


def split_batch(batch_size: int, worker_batch_size: int | None, world_size: int) -> tuple[int, int]:
    """``(global, per-worker)`` batch sizes from the global ``batch_size``, or from
    ``worker_batch_size`` when it is given, for ``world_size`` workers."""
    if worker_batch_size is not None:
        if isinstance(worker_batch_size, bool) or not isinstance(worker_batch_size, int):
            raise TypeError(f"'worker_batch_size' must be an int (got {worker_batch_size!r})")
        if worker_batch_size < 1:
            raise ValueError(f"'worker_batch_size' must be >= 1 (got {worker_batch_size})")
        return worker_batch_size * world_size, worker_batch_size
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"'batch_size' must be an int >= 1 (got {batch_size!r})")
    if batch_size % world_size:
        raise ValueError(
            f"'batch_size' {batch_size} (the global batch) must be a multiple of the "
            f"{world_size} workers; or give each worker 'worker_batch_size' seeds"
        )
    return batch_size, batch_size // world_size
