"""``DistNeighborLoader``: mini-batches of a partitioned graph, one part per worker.

Stages: seeds -> sample across the parts (:class:`~graphengine.distributed.DistNeighborSampler`)
-> fetch features across the parts (:class:`~graphengine.distributed.features.DistFeatures`)
-> copy to the device. Each stage runs in one thread of its own with an exchange (process
group) of its own, so the exchanges of batch ``i + 1`` overlap the caller's step on batch ``i``
while every worker still makes its collectives in the same order.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Sequence

import numpy as np
import torch
import torch.distributed as dist
from torch_geometric.data import Data

from graphengine.data.feature_dtype import as_batch_dtype
from graphengine.distributed.data import DistData
from graphengine.distributed.features import AccessCounter, cache_rows
from graphengine.distributed.sampler import DistNeighborSampler
from graphengine.loader.adapters import input_node_ids
from graphengine.loader.config import LoadingConfig, SamplingConfig
from graphengine.loader.pipeline import Stage, StagedLoader
from graphengine.loader.seeds import OwnSeedBatches, derive_seed
from graphengine.loader.stages import CopyToDevice, SampleNodes, add_batch_fields
from graphengine.loader.threads import sampler_threads
from samplers import SamplerOutput, as_edge_index
from samplers.neighbor import check_times

log = logging.getLogger(__name__)

# Mixed into the seed of the epochs sampled to choose the cache, so that they are not the
# training epochs themselves.
_CACHE_EPOCHS_SALT = 1 << 41


def dist_sampling_attributes(
    data: DistData, time_attr: str | None, weight_attr: str | None
) -> dict[str, np.ndarray]:
    """:class:`~graphengine.distributed.DistNeighborSampler`'s ``node_time``,
    ``edge_time`` and ``weights`` (whole-graph arrays by original id) from the attributes
    ``time_attr`` and ``weight_attr`` names in the part's stores: a node-level table of
    ``data.features.store`` (this part's rows, in local order; every worker's rows are
    exchanged, so this is a collective when ``time_attr`` names one), or an edge-level array
    on ``data.part`` (``[part.num_edges]``, in the part's CSC order, as ``part.edge_ids``).
    A worker's hop reads only its own part's edges, so the edge-level arrays it builds hold
    those and zeros elsewhere.

    Raises:
        ValueError: a name neither store holds, a time attribute both hold, a weight
            attribute that is not edge-level, or an array of the wrong length.
    """
    out = {}
    if time_attr is not None:
        on_nodes = time_attr in data.features.store
        on_edges = _part_edge_array(data, time_attr) is not None
        if on_nodes and on_edges:
            raise ValueError(
                f"The time attribute {time_attr!r} holds both node-level and edge-level information"
            )
        if on_nodes:
            out["node_time"] = _whole_node_table(data, time_attr)
        elif on_edges:
            out["edge_time"] = _whole_edge_array(data, time_attr)
        else:
            raise ValueError(
                f"'time_attr': the part has no node table (data.features.store) or edge "
                f"array (data.part) named {time_attr!r}"
            )
    if weight_attr is not None:
        if _part_edge_array(data, weight_attr) is None:
            raise ValueError(
                f"'weight_attr': the part has no edge array (data.part) named {weight_attr!r}"
            )
        out["weights"] = _whole_edge_array(data, weight_attr)
    return out


def _part_edge_array(data: DistData, name: str) -> np.ndarray | None:
    """The part's edge-level array ``name`` (``[part.num_edges]``) set beside the
    partition's own arrays (its structure, features and splits are no attributes), or
    ``None``."""
    if name in {field.name for field in dataclasses.fields(data.part)}:
        return None
    values = getattr(data.part, name, None)
    if not isinstance(values, (np.ndarray, torch.Tensor)):
        return None
    values = np.asarray(values)
    if values.shape != (data.part.num_edges,):
        raise ValueError(
            f"the part's edge array {name!r} must have shape ({data.part.num_edges},) "
            f"(got {values.shape})"
        )
    return values


def _whole_edge_array(data: DistData, name: str) -> np.ndarray:
    """The part's edge array ``name`` at its edges' original ids, zeros elsewhere."""
    part = data.part
    edge_ids = np.asarray(part.edge_ids)
    length = part.book.manifest.get("num_edges")
    if length is None:
        length = int(edge_ids.max()) + 1 if edge_ids.size else 0
    values = _part_edge_array(data, name)
    whole = np.zeros(int(length), dtype=values.dtype)
    whole[edge_ids] = values
    return whole


def _whole_node_table(data: DistData, name: str) -> np.ndarray:
    """The node-level table ``name`` of every part (each worker's ``[part.num_nodes]`` rows
    of its feature store, exchanged) by original id."""
    mine = data.features.store[name].numpy().reshape(-1)
    if mine.shape[0] != data.part.num_nodes:
        raise ValueError(
            f"the part's node table {name!r} must have one entry per node of the part "
            f"({data.part.num_nodes}) (got {mine.shape[0]})"
        )
    exchange = data.sampling
    by_new = np.concatenate(exchange.all_to_all_numpy([mine] * exchange.world_size))
    by_orig = np.empty_like(by_new)
    by_orig[np.asarray(data.book.new_to_orig)] = by_new
    return by_orig


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
        time_attr: the attribute of times (integers), as in :class:`~graphengine.NeighborLoader`,
            read from the part's stores (see :func:`dist_sampling_attributes`): node-level
            in ``data.features.store`` (every worker's rows are exchanged once, when the
            loader is built), or edge-level on ``data.part``.
        weight_attr: the edge-level attribute of weights (finite, ``>= 0``) on ``data.part``,
            as in :class:`~graphengine.NeighborLoader`.
        temporal_strategy: ``"uniform"`` or ``"last"``, as in
            :class:`~graphengine.NeighborLoader`.
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
        temporal_strategy: str = "uniform",
        input_time: np.ndarray | None = None,
        time_attr: str | None = None,
        weight_attr: str | None = None,
    ):
        sampling = SamplingConfig(
            num_neighbors,
            replace=replace,
            disjoint=disjoint,
            subgraph_type=subgraph_type,
            temporal_strategy=temporal_strategy,
            time_attr=time_attr,
            weight_attr=weight_attr,
        )
        loading = LoadingConfig(
            batch_size=batch_size,
            shuffle=shuffle,
            seed=seed,
            num_workers=num_workers,
            prefetch=prefetch,
            device=device,
        )
        self.data = data
        self.sampling = sampling
        self.loading = loading
        self.sampler = DistNeighborSampler(
            data.part,
            sampling.fanouts(),
            data.sampling,
            replace=sampling.replace,
            # Sampling and fetching threads run at once, each sampling call across the parts.
            num_threads=sampler_threads(loading.threads * 2),
            disjoint=sampling.disjoint,
            subgraph_type=sampling.subgraph_type,
            temporal_strategy=sampling.temporal_strategy,
            **dist_sampling_attributes(data, sampling.time_attr, sampling.weight_attr),
        )
        nodes = data.train_idx if input_nodes is None else input_nodes
        self.input_nodes = input_node_ids(nodes, data.num_nodes)
        self.batch_size = batch_size
        self.num_workers = num_workers
        self.original_ids = original_ids
        self.device = loading.device
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
        if loading.copies_to_cuda:
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
        x, y = self.data.features.fetch(out.node)  # a half table's rows travel half
        x = as_batch_dtype(x, None)
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
