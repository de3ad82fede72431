"""Batches of this worker's part of a partitioned graph: the
:class:`~graphengine.loader.dist_neighbor_loader.DistNeighborLoader`, data-parallel across
the parts' workers."""

from __future__ import annotations

from graphengine.distributed.data import DistData
from graphengine.loader.dist_neighbor_loader import DistNeighborLoader
from graphengine.nn.forward import SeedLogits
from graphengine.parallel.base import Strategy
from graphengine.train.batches.base import SeedBatches
from graphengine.train.config import TrainConfig


class PartitionedBatches(SeedBatches):
    """Neighborhoods of this part's training nodes, sampled across the parts, with remote
    feature rows fetched (and cached, ``remote_cache``) from their owners."""

    describes = "a partitioned graph"
    options = frozenset({"remote_cache"})

    @classmethod
    def accepts(cls, dataset, config: TrainConfig, strategy: Strategy) -> bool:
        return isinstance(dataset, DistData)

    def __init__(self, model, dataset: DistData, config: TrainConfig, strategy: Strategy):
        super().__init__(model, dataset, config, strategy)
        self.eval_module = SeedLogits(model, len(config.fanouts), config.forward)
        self.train_module = strategy.wrap(self.eval_module)
        self.loader = DistNeighborLoader(
            dataset,
            list(config.fanouts),
            batch_size=self.worker_batch_size,
            shuffle=True,
            seed=config.seed,
            remote_cache=config.remote_cache,
            num_workers=config.num_workers,
            device=self.device,
        )

    def start_epoch(self, epoch: int) -> None:
        super().start_epoch(epoch)
        self.loader.reset_stats()  # what evaluation exchanged is not this epoch's

    def epoch_metrics(self) -> dict:
        """``partition``: what crossed parts this epoch, all workers together (see
        :meth:`DistNeighborLoader.reset_stats`), with the derived ``cut_edge_share``
        (sampled edges whose source another part owns), ``cache_hit_rate`` and
        ``remote_bytes``."""
        totals = part_totals(self.loader.reset_stats(), self.strategy)
        totals["cache_hit_rate"] = totals["cache_hits"] / max(totals["remote_rows"], 1)
        totals["remote_bytes"] = totals["sampling_sent_bytes"] + totals["fetching_sent_bytes"]
        totals["exchange_seconds_per_worker"] = (
            totals["sampling_seconds"] + totals["fetching_seconds"]
        ) / self.strategy.world_size
        return {"partition": totals}


def part_totals(stats: dict, strategy: Strategy) -> dict:
    """``stats`` (a worker's counters of sampling across the parts, and for data
    parallelism of fetching) summed over all workers: seconds as floats, the rest as ints,
    with the derived ``cut_edge_share`` (sampled edges whose source another part owns).
    Every worker must call it."""
    keys = sorted(stats)
    totals = dict(zip(keys, strategy.sum([stats[k] for k in keys]), strict=True))
    totals = {k: v if k.endswith("seconds") else int(v) for k, v in totals.items()}
    totals["cut_edge_share"] = totals["cut_edges"] / max(totals["served_edges"], 1)
    return totals
