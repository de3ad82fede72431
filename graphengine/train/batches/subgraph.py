"""Subgraph batches (Cluster-GCN, GraphSAINT): the model runs on a whole subgraph and learns
from its training nodes; a homogeneous dataset in one process."""

from __future__ import annotations

import torch

from graphengine.datasets.dataset import GraphDataset
from graphengine.nn.forward import SeedLogits
from graphengine.parallel.base import Strategy
from graphengine.train.batches.base import TrainingBatches
from graphengine.train.config import TrainConfig
from graphengine.train.subgraph import (
    SUBGRAPH_SAMPLERS,
    SubgraphLogits,
    SubgraphSampling,
    subgraph_loss,
)


class SubgraphBatches(TrainingBatches):
    """The loader of ``config.sampler`` (a :class:`SubgraphSampling`, or its kind's name for
    the defaults); evaluation as ``config.eval_mode`` says, sampled with the fanouts."""

    describes = "subgraph sampling"
    samplers = SUBGRAPH_SAMPLERS

    @classmethod
    def accepts(cls, dataset, config: TrainConfig, strategy: Strategy) -> bool:
        return config.sampler_kind in SUBGRAPH_SAMPLERS

    def __init__(self, model, dataset: GraphDataset, config: TrainConfig, strategy: Strategy):
        sampling = config.sampler
        if isinstance(sampling, str):
            sampling = SubgraphSampling(sampling)
        if not isinstance(dataset, GraphDataset):
            raise ValueError(
                f"sampler {sampling.kind!r} trains on subgraphs of a homogeneous, "
                f"unpartitioned dataset (got a {type(dataset).__name__})"
            )
        if strategy.world_size > 1:
            raise ValueError(
                f"sampler {sampling.kind!r} trains in a single process for now (got "
                f"{strategy.world_size} workers)"
            )
        super().__init__(model, dataset, config, strategy)
        self.eval_module = SeedLogits(model, len(config.fanouts), config.forward)
        self.train_module = strategy.wrap(SubgraphLogits(model))
        self.loader = sampling.loader(
            dataset.to_data(), config.seed, config.num_workers, self.device
        )

    def loss(self, batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        batch = batch.to(self.device)
        logits = self.train_module(batch)
        self.check_logits(logits)
        loss, target = subgraph_loss(logits, batch)
        return loss, logits, target
