"""Neighborhood batches of a GraphDataset: the :class:`~graphengine.NeighborLoader`, or the
:class:`~graphengine.LaborLoader` with the same fanouts, data-parallel or in one process."""

from __future__ import annotations

from graphengine.datasets.dataset import GraphDataset
from graphengine.loader import LaborLoader, NeighborLoader
from graphengine.nn.forward import SeedLogits
from graphengine.parallel.base import Strategy
from graphengine.train.batches.base import OPTION_NEEDS, SeedBatches
from graphengine.train.config import TrainConfig
from graphengine.train.features import training_features

LOADERS = {"neighbor": NeighborLoader, "labor": LaborLoader}


class NeighborBatches(SeedBatches):
    """Sampled neighborhoods of the training nodes, each worker its share of every step; the
    batches gathered from the store :func:`~graphengine.train.features.training_features`
    chooses (the seeds' labels read from the dataset's table on the CPU)."""

    describes = "an unpartitioned homogeneous graph"
    samplers = tuple(LOADERS)
    options = frozenset({"feature_cache"})

    @classmethod
    def accepts(cls, dataset, config: TrainConfig, strategy: Strategy) -> bool:
        return isinstance(dataset, GraphDataset)

    def __init__(self, model, dataset: GraphDataset, config: TrainConfig, strategy: Strategy):
        super().__init__(model, dataset, config, strategy)
        if config.feature_cache is not None and self.device.type != "cpu":
            raise ValueError(OPTION_NEEDS["feature_cache"])
        self.eval_module = SeedLogits(model, len(config.fanouts), config.forward)
        self.train_module = strategy.wrap(self.eval_module)
        self.features = training_features(dataset, config, self.eval_module)
        self.labels = self.features.labels
        self.loader = LOADERS[config.sampler_kind](
            self.features.source(dataset),
            list(config.fanouts),
            batch_size=self.worker_batch_size,
            input_nodes=dataset.train_idx,
            shuffle=True,
            seed=config.seed,
            num_workers=config.num_workers,
            device=self.device,
            pin_memory=self.device.type == "cuda",
            rank=strategy.rank,
            world_size=strategy.world_size,
        )

    def epoch_metrics(self) -> dict:
        cache = self.features.cache
        return {} if cache is None else {"feature_cache": cache.epoch_metrics()}
