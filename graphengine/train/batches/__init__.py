"""The kinds of training batches, one module each, and the registry the Trainer picks from.

A new kind is a module with a :class:`~graphengine.train.batches.base.TrainingBatches`
subclass and one line in :data:`KINDS`; the training loop does not change.
"""

from __future__ import annotations

import torch

from graphengine.parallel.base import Strategy
from graphengine.train.batches.base import TrainingBatches, check_options
from graphengine.train.batches.hetero import HeteroBatches
from graphengine.train.batches.hybrid import HybridBatches
from graphengine.train.batches.hybrid_partitioned import HybridPartitionedBatches
from graphengine.train.batches.neighbor import NeighborBatches
from graphengine.train.batches.partitioned import PartitionedBatches
from graphengine.train.batches.subgraph import SubgraphBatches
from graphengine.train.config import TrainConfig

#: The kinds in the order they are asked whether they take a run: the first that accepts it
#: builds its batches.
KINDS: tuple[type[TrainingBatches], ...] = (
    SubgraphBatches,
    HeteroBatches,
    HybridBatches,
    HybridPartitionedBatches,
    PartitionedBatches,
    NeighborBatches,
)


def training_batches(
    model: torch.nn.Module, dataset, config: TrainConfig, strategy: Strategy
) -> TrainingBatches:
    """The training batches of the first kind in :data:`KINDS` that accepts ``dataset``,
    ``config`` and ``strategy``, built for them.

    Raises:
        ValueError: no kind accepts them, or ``config`` sets an option the kind does not
            read (naming the option and what it needs).
    """
    for kind in KINDS:
        if kind.accepts(dataset, config, strategy):
            check_options(kind, config)
            return kind(model, dataset, config, strategy)
    raise ValueError(
        f"no kind of training batches takes a {type(dataset).__name__} (expected a "
        "GraphDataset, HeteroGraphDataset or DistData)"
    )


__all__ = ["KINDS", "TrainingBatches", "training_batches"]
