"""``HybridNeighborLoader``: batches for P3-style hybrid parallelism, features split by columns.

Every worker samples its own seeds' batch as a data-parallel :class:`NeighborLoader` would
(the same seeds, the same samples), and holds columns ``[c_r, c_{r+1})`` of every node's
features (:class:`~graphengine.data.columns.FeatureColumns`). The first layer then needs, on
every worker, its columns of the inputs of *every* worker's batch. Stages:

    seeds -> sample -> labels -> share the first layer's structure (all-gather) ->
    gather this worker's columns of every batch's first-layer inputs -> copy

The shared structure is small: per batch, the first layer's source node ids (int64), its
edges' sources (int32, local) and its destination pointers (int32). Sharing runs in one
thread with a process group of its own, so it overlaps the caller's step on the previous
batch while every worker makes its collectives in the same order.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.distributed as dist
from torch_geometric.data import Data

from graphengine.batch.blocks import Block
from graphengine.batch.hybrid import HybridBatch
from graphengine.data.columns import FeatureColumns
from graphengine.data.feature_dtype import as_batch_dtype
from graphengine.data.feature_store import FeatureStore
from graphengine.datasets.dataset import GraphDataset
from graphengine.distributed.exchange import Exchange
from graphengine.loader.adapters import input_node_ids
from graphengine.loader.config import LoadingConfig, SamplingConfig
from graphengine.loader.pipeline import Stage, StagedLoader
from graphengine.loader.seeds import OwnSeedBatches, SeedBatches
from graphengine.loader.sources import homogeneous_sampler
from graphengine.loader.stages import GatherFeatures, SampleNodes
from graphengine.loader.threads import sampler_threads

_HEADER = 3  # num_src, num_dst, num_edges


def first_layer_dst(batch: Data, whole: bool) -> int:
    """How many of ``batch``'s nodes the first layer computes: all of them when the model
    runs on the whole batch (``whole``), else all but the last hop's (its first block)."""
    if whole:
        return int(batch.num_nodes)
    return int(sum(batch.num_sampled_nodes[:-1]))


def pack_first_layer(batch: Data, whole: bool) -> np.ndarray:
    """``batch``'s first layer as one int64 array: ``[num_src, num_dst, num_edges]``, the
    source node ids ``n_id`` (int64 ``[num_src]``), then, two int32 to an int64, the edges'
    local sources (``[num_edges]``) and the destinations' edge pointers (``[num_dst + 1]``).

    The first layer reads every node and edge of the batch (edges sorted by destination);
    it computes the first ``num_dst`` nodes (:func:`first_layer_dst`).
    """
    num_src = int(batch.num_nodes)
    num_dst = first_layer_dst(batch, whole)
    row, col = batch.edge_index[0].numpy(), batch.edge_index[1].numpy()
    rowptr = np.zeros(num_dst + 1, dtype=np.int32)
    np.cumsum(np.bincount(col, minlength=num_dst)[:num_dst], out=rowptr[1:])
    if rowptr[-1] != len(col):
        raise ValueError(
            f"the batch has edges into nodes beyond the first layer's {num_dst} destinations"
        )
    local = np.concatenate((row.astype(np.int32), rowptr))
    if len(local) % 2:
        local = np.append(local, np.int32(0))
    header = np.array([num_src, num_dst, len(row)], dtype=np.int64)
    return np.concatenate((header, batch.n_id.numpy().astype(np.int64), local.view(np.int64)))


def unpack_first_layer(payload: np.ndarray) -> tuple[torch.Tensor, Block]:
    """What :func:`pack_first_layer` packed: ``(n_id, block)``, ``n_id`` int64 ``[num_src]``."""
    num_src, num_dst, num_edges = (int(v) for v in payload[:_HEADER])
    n_id = torch.from_numpy(payload[_HEADER : _HEADER + num_src])
    local = payload[_HEADER + num_src :].view(np.int32)
    row = torch.from_numpy(local[:num_edges].astype(np.int64))
    rowptr = torch.from_numpy(local[num_edges : num_edges + num_dst + 1].astype(np.int64))
    col = torch.repeat_interleave(torch.arange(num_dst), rowptr.diff())
    return n_id, Block(torch.stack((row, col)), rowptr, num_src, num_dst)


def most_batches(exchange: Exchange, mine: int) -> int:
    """The most batches any worker of ``exchange`` needs, ``mine`` this worker's (at least
    one): a collective over its group, so that every worker runs as many batches."""
    count = torch.tensor([mine], dtype=torch.int64, device=exchange.device)
    dist.all_reduce(count, op=dist.ReduceOp.MAX, group=exchange.group)
    return max(1, int(count.item()))


def structure_stats(exchange: Exchange) -> dict:
    """What sharing first layers over ``exchange`` moved since its last reset, and starts
    counting anew: ``structure_sent_bytes``, ``structure_received_bytes`` and
    ``structure_seconds``."""
    shared = exchange.reset_stats()
    return {
        "structure_sent_bytes": shared.sent_bytes,
        "structure_received_bytes": shared.received_bytes,
        "structure_seconds": shared.seconds,
    }


class ShareFirstLayer:
    """Sharing: this worker's batch -> ``(batch, [(n_id_j, block_j) for every worker j])``,
    by one all-gather of :func:`pack_first_layer` over ``exchange``."""

    def __init__(self, exchange: Exchange, whole: bool):
        self.exchange = exchange
        self.whole = whole

    def __call__(self, batch: Data) -> tuple[Data, list[tuple[torch.Tensor, Block]]]:
        mine = pack_first_layer(batch, self.whole)
        received = self.exchange.all_to_all_numpy([mine] * self.exchange.world_size)
        return batch, [unpack_first_layer(payload) for payload in received]


class GatherColumns:
    """Gathering: ``(batch, first layers)`` -> a :class:`HybridBatch` with this worker's
    columns of every first layer's source rows (one gather for all of them)."""

    def __init__(self, columns: FeatureColumns, rank: int):
        self.columns = columns
        self.rank = rank

    def __call__(self, item: tuple[Data, list[tuple[torch.Tensor, Block]]]) -> HybridBatch:
        batch, layers = item
        ids = torch.cat([n_id for n_id, _ in layers])
        rows = self.columns.gather(ids)
        nbytes = rows.numel() * rows.element_size()
        rows = as_batch_dtype(rows, None)  # a float16 table's columns reach the model float32
        inputs = list(torch.split(rows, [block.num_src for _, block in layers]))
        blocks = [block for _, block in layers]
        return HybridBatch(batch, inputs, blocks, self.rank, nbytes)


def hybrid_stages(
    sample, labels, exchange: Exchange, whole: bool, columns: FeatureColumns, workers: int
) -> list[Stage]:
    """The hybrid loaders' stages: ``sample``, ``labels``, the first layers shared over
    ``exchange`` and this worker's ``columns`` gathered, the last in ``workers`` threads. One
    thread each up to the sharing, so that batches reach the collectives in order (a
    sampler's calls across parts are collectives too; a local one parallelizes within a
    batch)."""
    return [
        Stage("sample", sample),
        Stage("labels", labels),
        Stage("share", ShareFirstLayer(exchange, whole)),
        Stage("gather", GatherColumns(columns, exchange.rank), workers),
    ]


class HybridNeighborLoader(StagedLoader):
    """Mini-batches for hybrid (P3-style) training: this worker's sampled batch, its labels,
    and its columns of every worker's first-layer inputs (:class:`HybridBatch`).

    Every worker must build its loaders in the same order and iterate every batch of every
    pass: each batch is a collective.

    Args:
        dataset: the graph and labels (its features are not read: ``columns`` holds this
            worker's share of them).
        num_neighbors: neighbors per hop.
        columns: this worker's columns of the feature table.
        exchange: the process group the first layers are shared over (one of its own).
        batch_size: this worker's seeds per batch.
        input_nodes: int64 seed node ids. With ``split_seeds`` every worker passes the same
            ids and takes its equal share of each epoch's order, exactly as a data-parallel
            :class:`NeighborLoader` with ``rank``/``world_size`` does (the same batches and
            samples); without it these are this worker's own seeds, and every worker runs
            as many batches as the one with the most needs (others get smaller ones).
        shuffle, seed: each epoch's order and samples, as in :class:`NeighborLoader`.
        whole: the model's first layer computes every node of the batch (a model run on the
            whole batch, e.g. a degree-normalizing GCN), not only those the next reads.
        num_workers: gathering threads; 0 loads in the caller's thread.
        prefetch: batches in flight per thread.
        device: where batches go.
    """

    def __init__(
        self,
        dataset: GraphDataset,
        num_neighbors: Sequence[int],
        columns: FeatureColumns,
        exchange: Exchange,
        batch_size: int,
        input_nodes=None,
        shuffle: bool = False,
        seed: int = 0,
        split_seeds: bool = True,
        whole: bool = False,
        num_workers: int = 1,
        prefetch: int = 2,
        device: torch.device | str | None = None,
    ):
        sampling = SamplingConfig(num_neighbors)
        loading = LoadingConfig(
            batch_size=batch_size,
            shuffle=shuffle,
            seed=seed,
            num_workers=num_workers,
            prefetch=prefetch,
            device=device,
        )
        if columns.num_rows != dataset.num_nodes:
            raise ValueError(
                f"'columns' has {columns.num_rows} rows, the dataset {dataset.num_nodes} nodes"
            )
        graph = dataset.graph
        graph.validate()
        # One sampling thread (see the stages below): each call may use every Numba thread.
        self.sampler = homogeneous_sampler(graph, sampling, sampler_threads(1))
        self.sampling = sampling
        self.loading = loading
        nodes = dataset.train_idx if input_nodes is None else input_nodes
        self.input_nodes = input_node_ids(nodes, dataset.num_nodes)
        self.columns = columns
        self.exchange = exchange
        self.num_workers = num_workers
        self.device = loading.device
        rank, world_size = exchange.rank, exchange.world_size
        if split_seeds:
            seed_batches = SeedBatches(
                len(self.input_nodes), batch_size, shuffle, False, seed, rank, world_size
            )
        else:
            mine = -(-len(self.input_nodes) // batch_size)
            seed_batches = OwnSeedBatches(
                len(self.input_nodes), most_batches(exchange, mine), shuffle, seed, rank
            )
        sample = SampleNodes(
            self.sampler, self.input_nodes, np.arange(len(self.input_nodes), dtype=np.int64)
        )
        labels = GatherFeatures(FeatureStore({"y": dataset.y}))
        workers = loading.threads
        stages = hybrid_stages(sample, labels, exchange, whole, columns, workers)
        if loading.copies_to_cuda:
            stages.append(Stage("copy", self._copy))
        self._set_stages(seed_batches, stages, prefetch * workers)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(num_seeds={len(self.input_nodes)}, batches={len(self)}, "
            f"num_neighbors={list(self.sampler.fanouts)}, columns=[{self.columns.start}, "
            f"{self.columns.stop}) of {self.columns.num_columns}, worker "
            f"{self.exchange.rank}/{self.exchange.world_size})"
        )

    def reset_stats(self) -> dict:
        """What this worker's sharing of first layers moved since the last call, and starts
        counting anew: ``structure_sent_bytes``, ``structure_received_bytes`` and
        ``structure_seconds``. (Each batch carries its own ``feature_bytes``.)"""
        return structure_stats(self.exchange)

    def _copy(self, batch: HybridBatch) -> HybridBatch:
        return batch.to(self.device, non_blocking=True)
