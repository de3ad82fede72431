"""``DistHybridNeighborLoader``: hybrid (P3) batches of a partitioned graph, as P3 itself runs:
the graph's structure split by nodes (one part per worker), its features by columns.

Every worker samples its own part's seeds across the parts exactly as the data-parallel
:class:`~graphengine.loader.dist_neighbor_loader.DistNeighborLoader` does (the same batches,
the same samples for the same seed), then, as
:class:`~graphengine.loader.hybrid_loader.HybridNeighborLoader` does, shares each batch's
first layer with every worker and gathers its columns of every worker's first-layer inputs
from the table :func:`~graphengine.distributed.columns.redistribute_columns` built. Stages:

    seeds -> sample across the parts (the sampler's exchange) -> the batch and its seeds'
    labels (this part's own) -> share the first layer (the structure exchange) -> gather
    this worker's columns of every batch's inputs -> copy

No feature row crosses workers per batch: what crosses is the sampler's requests and answers
(each hop), the first layers' structure (one all-gather) and, in the step, the partial
first-layer results. Sampling and sharing each run in one thread with a process group of
their own, so every worker makes each group's collectives in the same order while batch
``i + 1`` is sampled during batch ``i``'s sharing and the caller's step.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch_geometric.data import Data

from graphengine.batch.hybrid import HybridBatch
from graphengine.data.columns import FeatureColumns
from graphengine.distributed.data import DistData
from graphengine.distributed.exchange import Exchange
from graphengine.distributed.sampler import DistNeighborSampler
from graphengine.loader.adapters import input_node_ids
from graphengine.loader.config import LoadingConfig, SamplingConfig
from graphengine.loader.hybrid_loader import hybrid_stages, most_batches, structure_stats
from graphengine.loader.pipeline import Stage, StagedLoader
from graphengine.loader.seeds import OwnSeedBatches
from graphengine.loader.stages import GatherFeatures, SampleNodes
from graphengine.loader.threads import sampler_threads
from samplers import SamplerOutput


class SeedLabels:
    """The batch: a :class:`SamplerOutput` -> a ``Data`` without features (local
    ``edge_index`` sorted by destination, ``n_id`` in new ids, ``e_id`` original edge ids,
    the per-hop counts) whose ``y`` (int64 ``[batch_size]``) is its seeds' labels, read from
    this part's own table: the loss reads no other label, and the seeds are this part's."""

    def __init__(self, data: DistData):
        self.store = data.features.store
        self.start = data.part.start
        self.batch = GatherFeatures(None)

    def __call__(self, out: SamplerOutput) -> Data:
        data = self.batch(out)
        seeds = data.n_id[: data.batch_size] - self.start
        data.y = self.store.gather("y", seeds)
        return data


class DistHybridNeighborLoader(StagedLoader):
    """Hybrid mini-batches of a partitioned graph: this worker's batch sampled across the
    parts, its seeds' labels, and its columns of every worker's first-layer inputs
    (:class:`~graphengine.batch.hybrid.HybridBatch`, run by
    :class:`~graphengine.parallel.HybridParallel`).

    Every worker must build its loaders in the same order and iterate every batch of every
    pass: each batch is a collective of two groups. The number of batches is set by the
    worker with the most seeds (the others' batches are a little smaller, or empty).

    Args:
        data: this worker's :class:`~graphengine.distributed.DistData` (its features are
            not read: ``columns`` holds this worker's share of them).
        num_neighbors: neighbors per hop, ``-1`` for all.
        columns: this worker's columns of every node's features, rows in new-id order
            (:func:`~graphengine.distributed.columns.redistribute_columns`).
        exchange: the process group the first layers are shared over (one of its own, not
            ``data.sampling``: the sampler's thread uses that one).
        batch_size: this worker's seeds per batch.
        input_nodes: int64 seed ids, this part's own nodes (global new ids); the part's
            training nodes by default.
        shuffle, replace, seed: each epoch's order and samples, as in
            :class:`~graphengine.loader.dist_neighbor_loader.DistNeighborLoader`.
        whole: the model's first layer computes every node of the batch (see
            :class:`~graphengine.loader.hybrid_loader.HybridNeighborLoader`).
        num_workers: gathering threads; 0 loads in the caller's thread.
        prefetch: batches in flight per thread.
        device: where batches go.

    Raises:
        ValueError: ``columns`` without a row per node, ``exchange`` not one worker per
            part with this part's rank, or a seed another part owns.
    """

    def __init__(
        self,
        data: DistData,
        num_neighbors: Sequence[int],
        columns: FeatureColumns,
        exchange: Exchange,
        batch_size: int,
        input_nodes: np.ndarray | torch.Tensor | Sequence[int] | None = None,
        shuffle: bool = False,
        replace: bool = False,
        seed: int = 0,
        whole: bool = False,
        num_workers: int = 1,
        prefetch: int = 2,
        device: torch.device | str | None = None,
    ):
        sampling = SamplingConfig(num_neighbors, replace=replace)
        loading = LoadingConfig(
            batch_size=batch_size,
            shuffle=shuffle,
            seed=seed,
            num_workers=num_workers,
            prefetch=prefetch,
            device=device,
        )
        part = data.part
        if columns.num_rows != data.num_nodes:
            raise ValueError(
                f"'columns' has {columns.num_rows} rows, the partition {data.num_nodes} nodes"
            )
        if exchange.world_size != data.book.num_parts or exchange.rank != part.part:
            raise ValueError(
                f"'exchange': part {part.part} of {data.book.num_parts} needs worker "
                f"{part.part} of {data.book.num_parts} (got worker {exchange.rank} of "
                f"{exchange.world_size})"
            )
        nodes = data.train_idx if input_nodes is None else input_nodes
        self.input_nodes = input_node_ids(nodes, data.num_nodes)
        foreign = (self.input_nodes < part.start) | (self.input_nodes >= part.stop)
        if foreign.any():
            raise ValueError(
                f"'input_nodes' must be this part's own nodes [{part.start}, {part.stop}) "
                f"(their labels are the ones it holds); got node {self.input_nodes[foreign][0]}"
            )
        self.data = data
        self.sampling = sampling
        self.loading = loading
        # One sampling thread (see the stages below): each call may use every Numba thread.
        self.sampler = DistNeighborSampler(
            part,
            sampling.fanouts(),
            data.sampling,
            replace=sampling.replace,
            num_threads=sampler_threads(1),
        )
        self.columns = columns
        self.exchange = exchange
        self.num_workers = num_workers
        self.device = loading.device
        mine = -(-len(self.input_nodes) // batch_size)
        seed_batches = OwnSeedBatches(
            len(self.input_nodes), most_batches(data.sampling, mine), shuffle, seed, part.part
        )
        sample = SampleNodes(
            self.sampler, self.input_nodes, np.arange(len(self.input_nodes), dtype=np.int64)
        )
        workers = loading.threads
        stages = hybrid_stages(sample, SeedLabels(data), exchange, whole, columns, workers)
        if loading.copies_to_cuda:
            stages.append(Stage("copy", self._copy))
        self._set_stages(seed_batches, stages, prefetch * workers)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(part={self.data.part.part}/{self.data.book.num_parts}, "
            f"num_seeds={len(self.input_nodes)}, batches={len(self)}, "
            f"num_neighbors={list(self.sampler.fanouts)}, columns=[{self.columns.start}, "
            f"{self.columns.stop}) of {self.columns.num_columns})"
        )

    def reset_sampling_stats(self) -> dict:
        """What sampling across the parts did on this worker since the last call, and starts
        counting anew: ``frontier_nodes``, ``remote_frontier_nodes``, ``served_edges`` and
        ``cut_edges`` (:class:`~graphengine.distributed.SamplingStats`), and the sampler's
        exchange's ``sampling_calls``, ``sampling_sent_bytes``, ``sampling_received_bytes``
        and ``sampling_seconds``."""
        stats = self.sampler.reset_stats().as_dict()
        for key, value in self.data.sampling.reset_stats().as_dict().items():
            stats[f"sampling_{key}"] = value
        return stats

    def reset_structure_stats(self) -> dict:
        """What this worker's sharing of first layers moved since the last call, and starts
        counting anew: ``structure_sent_bytes``, ``structure_received_bytes`` and
        ``structure_seconds``. (Each batch carries its own ``feature_bytes``.)"""
        return structure_stats(self.exchange)

    def reset_stats(self) -> dict:
        """Both: :meth:`reset_sampling_stats` and :meth:`reset_structure_stats`."""
        return {**self.reset_sampling_stats(), **self.reset_structure_stats()}

    def _copy(self, batch: HybridBatch) -> HybridBatch:
        return batch.to(self.device, non_blocking=True)
