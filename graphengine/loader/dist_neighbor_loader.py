"""``DistNeighborLoader``: mini-batches of a partitioned graph, one part per worker.

Stages: seeds -> sample across the parts (:class:`~graphengine.distributed.DistNeighborSampler`)
-> fetch features across the parts (:class:`~graphengine.distributed.features.DistFeatures`)
-> copy to the device. Each stage runs in one thread of its own with an exchange (process
group) of its own, so the exchanges of batch ``i + 1`` overlap the caller's step on batch ``i``
while every worker still makes its collectives in the same order.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

import numpy as np
import torch
import torch.distributed as dist
from torch_geometric.data import Data

from graphengine.distributed.data import DistData
from graphengine.distributed.features import AccessCounter, cache_rows
from graphengine.distributed.sampler import DistNeighborSampler
from graphengine.loader.pipeline import Stage
from graphengine.loader.seeds import OwnSeedBatches, derive_seed
from graphengine.loader.staged import StagedLoader
from graphengine.loader.stages import CopyToDevice, SampleNodes, add_batch_fields
from graphengine.loader.threads import sampler_threads
from samplers import SamplerOutput, as_edge_index, check_fanouts, check_node_ids
from samplers.neighbor import check_times

log = logging.getLogger(__name__)

# Mixed into the seed of the epochs sampled to choose the cache, so that they are not the
# training epochs themselves.
_CACHE_EPOCHS_SALT = 1 << 41


def _unread_remote(part, chosen: np.ndarray, capacity: int) -> np.ndarray:
    """``capacity - len(chosen)`` other parts' nodes not in ``chosen`` (ascending ids)."""
    remote = np.concatenate(
        (np.arange(part.start, dtype=np.int64), np.arange(part.stop, part.book.num_nodes))
    )
    return np.setdiff1d(remote, chosen, assume_unique=True)[: capacity - chosen.shape[0]]


class DistNeighborLoader(StagedLoader):
    """Mini-batches of sampled neighborhoods across the parts of a partitioned graph.

    Batches are PyG ``Data`` objects as :class:`~graphengine.NeighborLoader` makes them (``x``,
    ``y``, local ``edge_index``, ``n_id``, ``e_id``, ``input_id``, ``batch_size``, per-hop
    counts), with node ids in the partition's numbering (``n_id`` in original ids with
    ``original_ids=True``) and ``e_id`` the original edge ids.

    Every worker must build its loaders in the same order and iterate every batch of every
    pass (a worker with fewer seeds gets smaller batches, never fewer), because each batch
    is a collective.

    Args:
        data: this worker's :class:`~graphengine.distributed.DistData`.
        num_neighbors: neighbors per node for each hop, ``-1`` for all.
        batch_size: this worker's seeds per batch; the number of batches is set by the
            worker with the most seeds.
        input_nodes: seed ids (global new ids, best this part's own); the part's training
            nodes by default.
        shuffle: reshuffle the seeds every epoch.
        replace: sample with replacement.
        seed: seeds every epoch's order and samples (the same on every worker).
        remote_cache: the cache of remote feature rows: rows (int), a share of the remote
            nodes (``"5%"``) or bytes (``"64MB"``); ``None`` keeps the cache the features
            already have. Chosen by how often ``cache_epochs`` pre-sampled epochs read each row
            (then, if room is left, rows they never read).
        cache_epochs: epochs sampled to choose the cache.
        num_workers: 0 loads in the caller's thread; otherwise the stages run in threads.
        prefetch: batches in flight besides the one the caller holds.
        device: where batches go (a CUDA device: copied in a thread of their own).
        original_ids: give ``n_id`` in original ids (reads the id map for every node).
        disjoint, subgraph_type: as in :class:`~graphengine.NeighborLoader` (``"induced"``
            excepted: see :class:`~graphengine.distributed.DistNeighborSampler`).
        weights, node_time, edge_time, temporal_strategy: weighted or temporal sampling, as
            :class:`~graphengine.distributed.DistNeighborSampler` takes them (arrays of the
            whole graph by original id).
        input_time: each seed's time (integer ``[len(input_nodes)]``), by default its node
            time.
    """

    def __init__(
        self,
        data: DistData,
        num_neighbors: Sequence[int],
        batch_size: int = 1,
        input_nodes: np.ndarray | torch.Tensor | Sequence[int] | None = None,
        shuffle: bool = False,
        replace: bool = False,
        seed: int = 0,
        remote_cache: int | str | None = None,
        cache_epochs: int = 1,
        num_workers: int = 1,
        prefetch: int = 2,
        device: torch.device | str | None = None,
        original_ids: bool = False,
        disjoint: bool = False,
        subgraph_type: str = "directional",
        weights: np.ndarray | None = None,
        node_time: np.ndarray | None = None,
        edge_time: np.ndarray | None = None,
        temporal_strategy: str = "uniform",
        input_time: np.ndarray | None = None,
    ):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"'batch_size' must be a positive int (got {batch_size!r})")
        if num_workers < 0:
            raise ValueError(f"'num_workers' must be >= 0 (got {num_workers})")
        self.data = data
        self.sampler = DistNeighborSampler(
            data.part,
            check_fanouts(num_neighbors, "num_neighbors"),
            data.sampling,
            replace=replace,
            num_threads=sampler_threads(max(num_workers, 1) * 2),
            disjoint=disjoint,
            subgraph_type=subgraph_type,
            weights=weights,
            node_time=node_time,
            edge_time=edge_time,
            temporal_strategy=temporal_strategy,
        )
        nodes = data.train_idx if input_nodes is None else input_nodes
        self.input_nodes = check_node_ids(nodes, data.num_nodes, "input_nodes")
        self.batch_size = batch_size
        self.num_workers = num_workers
        self.original_ids = original_ids
        self.device = None if device is None else torch.device(device)
        num_batches = self._agree_on_batches(-(-len(self.input_nodes) // batch_size))
        seed_batches = OwnSeedBatches(
            len(self.input_nodes), num_batches, shuffle, seed, data.part.part
        )
        input_times = None
        if input_time is not None:
            input_times = check_times(input_time, len(self.input_nodes), "input_time")
        self._sample = SampleNodes(
            self.sampler,
            self.input_nodes,
            np.arange(len(self.input_nodes), dtype=np.int64),
            input_times,
        )
        stages = [Stage("sample", self._sample), Stage("fetch", self._fetch)]
        if self.device is not None and self.device.type == "cuda":
            stages.append(Stage("copy", CopyToDevice(self.device)))
        self._set_stages(seed_batches, stages, prefetch)
        if remote_cache is not None:
            self.fill_cache(remote_cache, cache_epochs, seed)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(part={self.data.part.part}/{self.data.book.num_parts}, "
            f"num_seeds={len(self.input_nodes)}, batches={len(self)}, "
            f"num_neighbors={list(self.sampler.fanouts)}, device={self.device})"
        )

    def reset_stats(self) -> dict:
        """What crossed parts since the last call, on this worker: ``frontier_nodes`` and
        ``remote_frontier_nodes`` (structure asked of other parts), ``served_edges`` and
        ``cut_edges`` (edges this worker sampled, and those whose source another part owns),
        the feature rows (``local_rows``, ``remote_rows``, ``cache_hits``, ``fetched_rows``,
        ``served_rows``) and each exchange's ``calls``, ``sent_bytes``, ``received_bytes``
        and ``seconds`` (``sampling_*`` and ``fetching_*``)."""
        stats = {**self.sampler.reset_stats().as_dict()}
        features = self.data.features.reset_stats().as_dict()
        features.pop("hit_rate")
        stats.update(features)
        for name in ("sampling", "fetching"):
            for key, value in getattr(self.data, name).reset_stats().as_dict().items():
                stats[f"{name}_{key}"] = value
        return stats

    def fill_cache(self, size: int | str, epochs: int = 1, seed: int = 0) -> int:
        """Fill the features' cache of remote rows with the ``size`` rows (see
        ``remote_cache``) that ``epochs`` pre-sampled epochs read most; returns the rows
        cached. A collective: every worker calls it."""
        features = self.data.features
        row_bytes = features.num_features * features.store["x"].element_size() + 8
        # Every worker rehearses if any caches (the rehearsal is a collective).
        agreed = self._agree(
            cache_rows(size, row_bytes, features.num_remote_nodes), dist.ReduceOp.MAX
        )
        if agreed > 0:
            capacity = min(agreed, features.num_remote_nodes)
            started = time.perf_counter()
            chosen = self.access_counts(epochs, seed).most_frequent(capacity)
            if chosen.shape[0] < capacity:  # room for rows the rehearsal never read
                chosen = np.union1d(chosen, _unread_remote(self.data.part, chosen, capacity))
            cache = features.fill_cache(chosen)
            log.info(
                "part %d: cached %d remote rows (%.1f MB) chosen over %d pre-sampled epoch(s) "
                "in %.1f s",
                self.data.part.part,
                cache.num_rows,
                cache.nbytes / 1e6,
                epochs,
                time.perf_counter() - started,
            )
        else:
            features.fill_cache(np.empty(0, dtype=np.int64))
        self.reset_stats()
        return features.cache.num_rows

    def access_counts(self, epochs: int = 1, seed: int = 0) -> AccessCounter:
        """How often ``epochs`` pre-sampled epochs (seeded apart from the training epochs)
        read each other part's node. A collective: every worker calls it."""
        batches = OwnSeedBatches(
            len(self.input_nodes),
            len(self),
            True,
            derive_seed(seed, _CACHE_EPOCHS_SALT),
            self.data.part.part,
        )
        part = self.data.part
        counter = AccessCounter()
        for _ in range(epochs):
            for request in batches:
                node = self._sample(request).node
                counter.add(node[(node < part.start) | (node >= part.stop)])
        return counter

    def _fetch(self, out: SamplerOutput) -> Data:
        """A sampled subgraph -> a ``Data`` with its nodes' rows from wherever they live."""
        x, y = self.data.features.fetch(out.node)
        n_id = torch.from_numpy(out.node)
        if self.original_ids:
            n_id = torch.from_numpy(self.data.book.to_orig(out.node))
        data = Data(
            x=x,
            y=y,
            edge_index=torch.from_numpy(as_edge_index(out.row, out.col)),
            n_id=n_id,
            e_id=torch.from_numpy(out.edge),
        )
        data.num_nodes = int(out.node.shape[0])
        add_batch_fields(data, out)
        return data

    def _agree_on_batches(self, mine: int) -> int:
        """The most batches any worker needs (at least one)."""
        return max(1, int(self._agree(mine, dist.ReduceOp.MAX)))

    def _agree(self, value: int, op: dist.ReduceOp) -> int:
        exchange = self.data.sampling
        tensor = torch.tensor([value], dtype=torch.int64, device=exchange.device)
        dist.all_reduce(tensor, op=op, group=exchange.group)
        return int(tensor.item())
