"""Hybrid (P3) batches of a partitioned graph, as P3 itself runs: the structure split by nodes
(each worker samples its part's seeds across the parts), the features by columns (each worker
holds its columns of every node, redistributed from the parts' rows once, at the start)."""

from __future__ import annotations

from graphengine.data.columns import FeatureColumns
from graphengine.distributed.columns import redistribute_columns
from graphengine.distributed.data import DistData
from graphengine.loader.dist_hybrid_loader import DistHybridNeighborLoader
from graphengine.parallel import HybridParallel
from graphengine.parallel.base import Strategy
from graphengine.train.batches.hybrid import HybridBatches
from graphengine.train.batches.partitioned import part_totals
from graphengine.train.config import TrainConfig


class HybridPartitionedBatches(HybridBatches):
    """:class:`~graphengine.loader.dist_hybrid_loader.DistHybridNeighborLoader` batches of a
    :class:`~graphengine.distributed.DistData` for a
    :class:`~graphengine.parallel.HybridParallel` strategy: the batches and samples of the
    data-parallel partitioned kind, the steps of the hybrid one. Evaluation runs sampled
    batches the same way, each worker on its own part's nodes."""

    describes = "hybrid workers on a partitioned graph"
    loader_class = DistHybridNeighborLoader

    @classmethod
    def accepts(cls, dataset, config: TrainConfig, strategy: Strategy) -> bool:
        return isinstance(strategy, HybridParallel) and isinstance(dataset, DistData)

    def _feature_columns(self) -> FeatureColumns:
        """This worker's columns of every node, from every part's rows by one all-to-all over
        the strategy's structure exchange (gloo, host memory, idle until the loaders run)."""
        return redistribute_columns(self.dataset.part, self.strategy.structure)

    def _seed_options(self, shuffle: bool) -> dict:
        """None: each worker's seeds are its own part's nodes, seeded as the partitioned
        kind's and the sampled evaluation's are."""
        return {}

    def traffic(self) -> dict:
        return self.loader.reset_structure_stats()

    def epoch_metrics(self) -> dict:
        """``partition``: what sampling across the parts moved this epoch, all workers
        together (see :meth:`DistHybridNeighborLoader.reset_sampling_stats`), with the derived
        ``cut_edge_share`` (sampled edges whose source another part owns), ``remote_bytes``
        (the sampler's bytes sent between workers; no feature row crosses) and
        ``exchange_seconds_per_worker``. The first layers' structure and partial results are
        in ``traffic``."""
        totals = part_totals(self.loader.reset_sampling_stats(), self.strategy)
        totals["remote_bytes"] = totals["sampling_sent_bytes"]
        totals["exchange_seconds_per_worker"] = (
            totals["sampling_seconds"] / self.strategy.world_size
        )
        return {"partition": totals}
