"""Hybrid-parallel batches (P3): every worker samples its own batches of the whole graph and
gathers its share of the feature columns of every worker's batches."""

from __future__ import annotations

import numpy as np

from graphengine.data.columns import FeatureColumns
from graphengine.distributed.data import DistData
from graphengine.loader.hybrid_loader import HybridNeighborLoader
from graphengine.loader.pipeline import StagedLoader
from graphengine.nn.forward import SeedLogits
from graphengine.parallel import HybridParallel
from graphengine.parallel.base import Strategy
from graphengine.parallel.hybrid import runs_whole
from graphengine.train.batches.base import SeedBatches
from graphengine.train.config import TrainConfig


class HybridBatches(SeedBatches):
    """:class:`~graphengine.loader.hybrid_loader.HybridNeighborLoader` batches for a
    :class:`~graphengine.parallel.HybridParallel` strategy; evaluation runs sampled batches
    the same way (each worker holds a share of the feature columns)."""

    describes = "hybrid workers"
    loader_class = HybridNeighborLoader

    @classmethod
    def accepts(cls, dataset, config: TrainConfig, strategy: Strategy) -> bool:
        return isinstance(strategy, HybridParallel) and not isinstance(dataset, DistData)

    def __init__(self, model, dataset, config: TrainConfig, strategy: HybridParallel):
        super().__init__(model, dataset, config, strategy)
        if config.eval_mode not in ("auto", "sampled"):
            raise ValueError(
                "--parallel hybrid evaluates 'sampled' mini-batches (each worker holds a share "
                f"of the feature columns), not {config.eval_mode!r}: use --eval sampled or auto"
            )
        self.eval_mode = "sampled"
        self.seed_logits = SeedLogits(model, len(config.fanouts), config.forward)
        self.train_module = strategy.wrap(self.seed_logits)
        self.eval_module = self.train_module
        self.feature_columns = self._feature_columns()
        self.loader = self._loader(dataset.train_idx, shuffle=True)
        self.eval_loader = self._loader

    def _feature_columns(self) -> FeatureColumns:
        """This worker's columns of the feature table, read from the dataset's ``x``."""
        return self.strategy.feature_columns(self.dataset.x)

    def _loader(self, nodes: np.ndarray, shuffle: bool = False) -> StagedLoader:
        """Hybrid batches of the training nodes (``shuffle``) or of this worker's evaluation
        nodes, in :attr:`loader_class` with :meth:`_seed_options`."""
        return self.loader_class(
            self.dataset,
            list(self.config.fanouts),
            self.feature_columns,
            self.strategy.structure,
            batch_size=self.worker_batch_size,
            input_nodes=nodes,
            shuffle=shuffle,
            seed=self.config.seed if shuffle else self.config.seed + 1,
            whole=runs_whole(self.seed_logits),
            num_workers=self.config.num_workers,
            device=self.device,
            **self._seed_options(shuffle),
        )

    def _seed_options(self, shuffle: bool) -> dict:
        """How the loader splits its seeds: the training nodes pass to all workers, each
        taking its share of every step; evaluation nodes are this worker's own."""
        return {"split_seeds": shuffle}

    def start_epoch(self, epoch: int) -> None:
        super().start_epoch(epoch)
        self.loader.reset_stats()  # what evaluation exchanged is not this epoch's

    def traffic(self) -> dict:
        return self.loader.reset_stats()
