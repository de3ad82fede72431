"""Heterogeneous batches: the :class:`~graphengine.NeighborLoader` over a
HeteroGraphDataset's ``HeteroData``, seeded with its target type's nodes, in one process."""

from __future__ import annotations

import numpy as np
import torch

from graphengine.datasets.hetero import HeteroGraphDataset
from graphengine.loader import NeighborLoader
from graphengine.parallel.base import Strategy
from graphengine.train.batches.base import SeedBatches
from graphengine.train.config import TrainConfig
from graphengine.train.hetero import HeteroSeedLogits, check_hetero_strategy, feature_bytes


class HeteroBatches(SeedBatches):
    """Batches of the target type's training nodes; the model runs on the whole batch and the
    loss is on the seeds' rows of the target type; evaluation is sampled the same way."""

    describes = "a heterogeneous graph"

    @classmethod
    def accepts(cls, dataset, config: TrainConfig, strategy: Strategy) -> bool:
        return isinstance(dataset, HeteroGraphDataset)

    def __init__(self, model, dataset: HeteroGraphDataset, config: TrainConfig, strategy):
        check_hetero_strategy(strategy)
        _check_initialized(model)
        super().__init__(model, dataset, config, strategy)
        self.target = dataset.target
        self.eval_module = HeteroSeedLogits(model, dataset.target, config.forward)
        self.train_module = strategy.wrap(self.eval_module)
        self.hetero_data = dataset.to_hetero_data()
        self.loader = self._loader(dataset.train_idx, shuffle=True)
        self.eval_loader = self._loader

    def _loader(self, nodes, shuffle: bool = False) -> NeighborLoader | list:
        """Batches of target nodes ``nodes``: the training nodes (``shuffle``) or evaluation
        nodes (none: no batches)."""
        if not shuffle and len(nodes) == 0:
            return []
        return NeighborLoader(
            self.hetero_data,
            list(self.config.fanouts),
            batch_size=self.worker_batch_size,
            input_nodes=(self.target, np.asarray(nodes, dtype=np.int64)),
            shuffle=shuffle,
            seed=self.config.seed if shuffle else self.config.seed + 1,
            num_workers=self.config.num_workers,
            device=self.device,
            pin_memory=self.device.type == "cuda",
        )

    def feature_bytes(self, batch) -> int:
        return feature_bytes(batch)


def _check_initialized(model: torch.nn.Module) -> None:
    """Raise ``ValueError`` if ``model`` has lazy weights not yet initialized (the optimizer
    could not hold them)."""
    lazy = [
        name
        for name, p in model.named_parameters()
        if isinstance(p, torch.nn.parameter.UninitializedParameter)
    ]
    if lazy:
        raise ValueError(
            f"the model has {len(lazy)} uninitialized lazy parameters (e.g. {lazy[0]}): run it "
            "once on a batch, or build it with graphengine.nn.models.build_model(..., "
            "metadata=...), which does"
        )
