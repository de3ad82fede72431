"""The contract between the training loop and a kind of training batches.

A kind (one module each in this package) builds, from a model, a dataset, a
:class:`~graphengine.train.config.TrainConfig` and a parallel
:class:`~graphengine.parallel.Strategy`, everything the loop needs: the training loader, the
module a step differentiates, the loss of a batch, the evaluation's model and loader, and the
kind's own per-epoch metrics. The loop calls these and knows no kind.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable

import numpy as np
import torch
import torch.nn.functional as F

from graphengine.parallel.base import Strategy
from graphengine.train.config import TrainConfig, split_batch
from graphengine.train.hetero import seed_store
from graphengine.train.labels import seed_labels


class TrainingBatches(ABC):
    """A kind of training batches, built for one run.

    Subclasses set, in ``__init__``:

    Attributes:
        loader: the training batches of this worker (with ``set_epoch(epoch)`` and
            ``stage_times``, as graphengine's loaders have).
        train_module: the module a step calls on a batch (the model, wrapped by the strategy);
            its parameters are what the optimizer trains.
        eval_module: the module the sampled evaluation calls on a batch for its seeds'
            logits; its ``mode`` is the forward mode (``'blocks'``, ``'trim'``, ``'whole'``).
        eval_mode: the evaluation mode asked for, or the one this kind allows.
        eval_loader: builds the sampled evaluation's loader over this worker's nodes of a
            split; ``None``: the :class:`~graphengine.train.evaluate.Evaluator`'s own.

    Class attributes:
        describes: what this kind trains, for errors ("a partitioned graph").
        samplers: the config's samplers this kind trains with.
        options: the config's kind-specific options (see :data:`OPTION_NEEDS`) it reads.
    """

    describes: str = ""
    samplers: tuple[str, ...] = ("neighbor",)
    options: frozenset[str] = frozenset()

    loader: Iterable
    train_module: torch.nn.Module
    eval_module: torch.nn.Module
    eval_mode: str
    eval_loader: Callable[[np.ndarray], Iterable] | None = None

    def __init__(self, model: torch.nn.Module, dataset, config: TrainConfig, strategy: Strategy):
        self.model = model
        self.dataset = dataset
        self.config = config
        self.strategy = strategy
        self.device = strategy.device
        self.batch_size, self.worker_batch_size = split_batch(
            config.batch_size, config.worker_batch_size, strategy.world_size
        )
        self.eval_mode = config.eval_mode

    @classmethod
    @abstractmethod
    def accepts(cls, dataset, config: TrainConfig, strategy: Strategy) -> bool:
        """Whether this kind trains ``dataset`` as ``config`` and ``strategy`` say."""

    def start_epoch(self, epoch: int) -> None:
        """Prepare the loader for ``epoch`` (0-based)."""
        self.loader.set_epoch(epoch)

    @abstractmethod
    def loss(self, batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The mean loss of ``batch``'s labelled nodes, their logits ``[n, num_classes]`` and
        labels (int64 ``[n]``); the caller differentiates the loss."""

    def check_logits(self, logits: torch.Tensor) -> None:
        """Refuse a model's ``logits`` unless they are ``[n, num_classes]`` or wider, one
        column a class of the dataset: a narrower output failed inside the loss as torch's
        "Target 4 is out of bounds", naming neither the model's width nor the classes.

        Raises ``ValueError`` naming the output's shape and the dataset's classes."""
        classes = int(self.dataset.num_classes)
        if logits.dim() != 2 or logits.size(1) < classes:
            raise ValueError(
                f"the model's output has shape {list(logits.shape)}, for a dataset of "
                f"{classes} classes: expected [nodes, {classes}] logits, one column a class "
                f"(build the model with out_channels={classes})"
            )

    def feature_bytes(self, batch) -> int:
        """Bytes of feature rows gathered into ``batch``."""
        if hasattr(batch, "feature_bytes"):
            return int(batch.feature_bytes)
        x = getattr(batch, "x", None)
        return 0 if x is None else x.numel() * x.element_size()

    def traffic(self) -> dict:
        """What the loader sent to other workers since the last call (hybrid's shared
        structures), to add to the strategy's; starts counting anew."""
        return {}

    def epoch_metrics(self) -> dict:
        """This kind's own metrics of the epoch that just ended (e.g. ``partition``)."""
        return {}


class SeedBatches(TrainingBatches):
    """Batches whose first ``batch_size`` nodes (of the ``target`` type, for a heterogeneous
    batch) are the seeds the loss is computed on: the neighbor, LABOR, partitioned, hybrid
    and heterogeneous kinds.

    ``labels``: the dataset's label table (int ``[num_nodes]``) read at the seeds' ``n_id``
    when batches carry no ``y``; ``None`` when they do.
    """

    target: str | None = None
    labels: torch.Tensor | None = None

    def loss(self, batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        logits = self.train_module(batch)
        self.check_logits(logits)
        target = seed_labels(seed_store(batch, self.target), self.labels)
        # A worker of a partitioned graph may get no seeds for a step; it still takes part in
        # the gradients' all-reduce, with zeros.
        loss = F.cross_entropy(logits, target) if len(target) else logits.sum() * 0.0
        return loss, logits, target


#: The config options that only some kinds read, and what a run that sets one for another
#: kind is told.
OPTION_NEEDS = {
    "remote_cache": (
        "'remote_cache' needs a partitioned graph (a DistData) trained data-parallel: hybrid "
        "workers hold their columns of every node and fetch no remote rows"
    ),
    "feature_cache": (
        "'feature_cache' caches a GraphDataset's features for the NeighborLoader or "
        "LaborLoader on the CPU"
    ),
}


def check_options(kind: type[TrainingBatches], config: TrainConfig) -> None:
    """Refuse options of ``config`` that ``kind`` would ignore, and a sampler it lacks."""
    for option, message in OPTION_NEEDS.items():
        if getattr(config, option) is not None and option not in kind.options:
            raise ValueError(message)
    if config.sampler_kind not in kind.samplers:
        raise ValueError(
            f"sampler {config.sampler_kind!r} is not available for {kind.describes}; it "
            f"trains with {kind.samplers}"
        )
