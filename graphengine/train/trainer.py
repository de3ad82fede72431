"""The training loop: node classification with any PyG model on sampled mini-batches."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch_geometric.data import HeteroData
from torch_geometric.nn import GATConv
from torch_geometric.nn.models.basic_gnn import BasicGNN
from tqdm import tqdm

from graphengine.data.arrays import as_tensor
from graphengine.data.disk_io import IoCounters
from graphengine.data.feature_store import FeatureStore
from graphengine.data.memory import available_memory
from graphengine.datasets.dataset import GraphDataset
from graphengine.datasets.hetero import HeteroGraphDataset
from graphengine.distributed.data import DistData
from graphengine.distributed.features import cache_rows
from graphengine.loader import LaborLoader, NeighborLoader
from graphengine.loader.dist_neighbor_loader import DistNeighborLoader
from graphengine.loader.hybrid_loader import HybridNeighborLoader
from graphengine.nn.aggregation import uses_kernel
from graphengine.nn.forward import SeedLogits
from graphengine.nn.fused_sage import fuses
from graphengine.parallel import HybridParallel, Strategy, strategy_for
from graphengine.parallel.hybrid import runs_whole
from graphengine.runtime import host_memory_cache
from graphengine.train.checkpoint import check_trained_on, read_state, trained_on, write_state
from graphengine.train.evaluate import Evaluator
from graphengine.train.hetero import (
    HeteroSeedLogits,
    check_hetero_strategy,
    feature_bytes,
    seed_store,
)
from graphengine.train.labels import seed_labels, without_labels
from graphengine.train.subgraph import (
    SAMPLERS,
    SubgraphLogits,
    SubgraphSampling,
    subgraph_loss,
)

log = logging.getLogger(__name__)

PRECISIONS = ("fp32", "bf16")


class Trainer:
    """Trains ``model`` on ``dataset``'s training nodes with a :class:`NeighborLoader`, or,
    given this worker's part of a partitioned graph (:class:`~graphengine.distributed.DistData`),
    on its part's training nodes with a :class:`DistNeighborLoader`, data-parallel across the
    parts' workers.

    A heterogeneous dataset (:class:`~graphengine.datasets.HeteroGraphDataset`) trains on its
    target type's training nodes with a :class:`NeighborLoader` over its ``HeteroData``
    (``input_nodes=(target, train_idx)``), the loss on the seeds' rows of the target type,
    in a single process, evaluated on sampled mini-batches.

    Args:
        model: any module called as ``model(x, edge_index)`` returning
            ``[num_nodes, num_classes]`` logits. PyG ``BasicGNN`` models with one layer
            per hop run layer by layer on the batch's blocks, each layer computing only
            the nodes the next one reads (:mod:`graphengine.nn.blocks`); with norms or
            jumping knowledge, they get the per-hop counts to trim finished layers
            instead (``trim_to_layer``), which a degree-normalizing ``GCNConv`` does not
            allow (its normalization counts the edges trimming drops); on blocks it gets
            the batch's degrees (:mod:`graphengine.nn.gcn_blocks`). For a
            heterogeneous dataset, a module called as ``model(x_dict, edge_index_dict)``
            returning a dict of ``[num_nodes[t], num_classes]`` logits per node type (e.g.
            :func:`~graphengine.nn.models.build_model` with ``metadata``), its weights
            initialized (a lazy module run once), run on the whole batch.
        dataset: the graph, features, labels and splits, this worker's
            :class:`~graphengine.distributed.DistData`, or a
            :class:`~graphengine.datasets.HeteroGraphDataset`.
        fanouts: neighbors per hop for training (and for sampled evaluation).
        batch_size: seeds per training step, all workers together (the global batch): with
            ``W`` data-parallel workers each takes ``batch_size / W`` seeds of every step, so
            an epoch has as many steps as with one worker. Must be a multiple of ``W``.
        worker_batch_size: instead, the seeds each worker takes per step (the global batch
            is then ``W`` times larger, and an epoch has ``W`` times fewer steps).
        lr, weight_decay: Adam's settings.
        seed: seeds every epoch's batches.
        eval_mode: ``'full'`` (the model on the whole graph at once), ``'layerwise'``
            (each layer over all nodes in chunks, for PyG ``BasicGNN`` models),
            ``'sampled'`` (mini-batches with ``fanouts``) or ``'auto'`` (full below 5M
            edges; else sampled when the validation and test nodes are under 10% of the
            graph, else layer-wise when the model allows, else sampled; always sampled for
            a heterogeneous dataset, which refuses ``'full'`` and ``'layerwise'``).
        num_workers: sampling threads of the loaders (0: load in the training thread).
        forward: how the model runs on a batch (see :class:`~graphengine.nn.SeedLogits`);
            ``'auto'`` picks blocks, else trimming, else the whole batch, as the model allows
            (a heterogeneous dataset's model always runs on the whole batch).
        device: where the model runs; batches are copied there by the loader.
        checkpoint: a file to save after every epoch and to resume from if it exists.
        metrics_path: a file to append one JSON line of metrics per epoch to.
        progress: show a tqdm progress bar.
        strategy: how steps are split across workers; by default data-parallel in a joined
            process group of several workers, else a single process.
        remote_cache: with a partitioned graph, this worker's cache of remote feature rows:
            rows, a share of the remote nodes (``"5%"``) or bytes (``"64MB"``).
        parallel: ``'data'`` (every worker a whole model replica) or ``'hybrid'`` (P3: each
            worker holds a range of the feature columns and the first layer's weights for
            them, the later layers data-parallel; 2 or more workers, a PyG ``BasicGNN``
            with a GraphSAGE, GCN or GIN first layer, sampled evaluation). Ignored when
            ``strategy`` is given.
        sampler: the training batches: ``'neighbor'`` (:class:`NeighborLoader`),
            ``'labor'`` (:class:`LaborLoader`, the same fanouts), or subgraphs whose
            training nodes the model learns from, run on the whole subgraph: ``'cluster'``
            (Cluster-GCN), ``'saint'`` (GraphSAINT random walks) or a
            :class:`~graphengine.train.subgraph.SubgraphSampling` that says how (subgraphs:
            a homogeneous dataset in a single process; evaluation as ``eval_mode`` says).
        precision: ``'fp32'``, or ``'bf16'``: training steps under ``torch.autocast`` to
            bfloat16 (matrix products and GraphSAGE's fused layers in bf16, the loss and the
            weights, their gradients and Adam's state in float32); AVX-512 BF16 or AMX
            CPUs, and GPUs, run it faster. Evaluation computes in float32.
        feature_cache: for a :class:`~graphengine.datasets.GraphDataset` trained by the
            :class:`NeighborLoader` on the CPU, a host cache of its highest in-degree
            nodes' feature rows, read by the training batches (from a memory-mapped store
            larger than memory, the rows that most batches read stay in memory whatever
            the page cache evicts): rows, a share of the nodes (``"5%"``) or bytes
            (``"2GiB"``). Its hit rate is in each epoch's metrics (``feature_cache``).
        bf16_features: with ``precision='bf16'``, a :class:`~graphengine.datasets.GraphDataset`
            trained by the :class:`NeighborLoader` on the CPU (no ``feature_cache``, not
            ``access='random'``) by a model whose first layer casts ``x`` to bfloat16
            before anything reads it (a PyG GAT, or GraphSAGE's fused mean layer on
            blocks): the training batches gather from a bfloat16 copy of ``x`` in memory,
            made once when it takes at most a quarter of the memory available. The same
            results, with half the bytes to gather and no cast per batch, for half of
            ``x``'s size in memory. ``False`` keeps float32 batches.
        aggregate_from_store: for a :class:`~graphengine.datasets.GraphDataset` in memory
            (not ``access='random'``) trained by the :class:`NeighborLoader` on the CPU
            without ``feature_cache``, by a model whose first layer is GraphSAGE's fused
            mean layer on blocks: the training batches carry no ``x``, and that layer reads
            its rows from the feature table itself, by the batch's node ids, in its
            aggregation's pass. Less memory, slower steps: on synthetic-products (GraphSAGE
            3x256, fanouts 15,10,5, 2 threads) peak RSS fell from 2.08 to 1.62 GB and the
            step rose from 0.279 to 0.303 s, since the aggregation reads its 714K source rows
            at random from the 420 MB table (30-42 ms) where the loader's gather had read
            the batch's 376K distinct rows once (16 ms, overlapped) into a 150 MB tensor
            that the aggregation then reads in 16 ms.

    Each epoch's metrics also hold ``io``: the process's major and minor page faults and the
    bytes it read from disk during the epoch (``read_bytes``; ``None`` where the platform
    does not say).
    """

    def __init__(
        self,
        model: torch.nn.Module,
        dataset: GraphDataset | DistData | HeteroGraphDataset,
        fanouts: Sequence[int] = (15, 10, 5),
        batch_size: int = 1024,
        lr: float = 0.003,
        weight_decay: float = 0.0,
        seed: int = 0,
        eval_mode: str = "auto",
        num_workers: int = 1,
        forward: str = "auto",
        device: str | torch.device = "cpu",
        checkpoint: str | Path | None = None,
        metrics_path: str | Path | None = None,
        progress: bool = True,
        strategy: Strategy | None = None,
        worker_batch_size: int | None = None,
        remote_cache: int | str | None = None,
        parallel: str = "data",
        sampler: str | SubgraphSampling = "neighbor",
        precision: str = "fp32",
        feature_cache: int | str | None = None,
        bf16_features: bool = True,
        aggregate_from_store: bool = False,
    ):
        if precision not in PRECISIONS:
            raise ValueError(f"'precision' must be one of {PRECISIONS} (got {precision!r})")
        self.precision = precision
        self.strategy = strategy or strategy_for(device, parallel)
        hybrid = isinstance(self.strategy, HybridParallel)
        hetero = isinstance(dataset, HeteroGraphDataset)
        self._subgraph = _subgraph_sampling(sampler, dataset, self.strategy)
        self.sampler = self._subgraph.kind if self._subgraph is not None else sampler
        if self.sampler == "labor" and (hybrid or hetero or isinstance(dataset, DistData)):
            raise ValueError(
                "sampler 'labor' trains a homogeneous dataset, data-parallel and unpartitioned"
            )
        if hetero:
            check_hetero_strategy(self.strategy, remote_cache)
            _check_initialized(model)
        self._target = dataset.target if hetero else None
        if hybrid:
            eval_mode = _hybrid_eval_mode(eval_mode, dataset)
        self.batch_size, self.worker_batch_size = split_batch(
            batch_size, worker_batch_size, self.strategy.world_size
        )
        self.device = self.strategy.device
        self.model = model.to(self.device)
        self._seed_logits = (
            HeteroSeedLogits(self.model, dataset.target, forward)
            if hetero
            else SeedLogits(self.model, len(fanouts), forward)
        )
        self._train_model = self.strategy.wrap(
            SubgraphLogits(self.model) if self._subgraph is not None else self._seed_logits
        )
        self.dataset = dataset
        self.fanouts = list(fanouts)
        self.seed = seed
        self.num_workers = num_workers
        self.feature_columns = self.strategy.feature_columns(dataset.x) if hybrid else None
        self._hetero_data = dataset.to_hetero_data() if hetero else None
        if hybrid:
            sampled_loader = self._hybrid_loader
        elif hetero:
            sampled_loader = self._hetero_loader
        else:
            sampled_loader = None
        self.evaluator = Evaluator(
            self._train_model if hybrid else self._seed_logits,
            dataset,
            eval_mode,
            self.fanouts,
            self.worker_batch_size,
            seed=seed,
            num_workers=num_workers,
            strategy=self.strategy,
            progress=progress,
            sampled_loader=sampled_loader,
        )
        self.optimizer = torch.optim.Adam(
            self._train_model.parameters(), lr=lr, weight_decay=weight_decay
        )
        self.checkpoint = Path(checkpoint) if checkpoint is not None else None
        self.metrics_path = Path(metrics_path) if metrics_path is not None else None
        self.progress = progress
        self.epoch = 0
        # The training batches' own store (no y): a feature cache, bfloat16 features, or no x.
        self.feature_store: FeatureStore | None = None
        self._seed_labels: torch.Tensor | None = None  # y, when the batches carry none
        self._cache_counts: tuple[int, int] | None = None  # with a feature cache
        if hybrid:
            if remote_cache is not None:
                raise ValueError("'remote_cache' needs a partitioned graph (a DistData)")
            self.train_loader = self._hybrid_loader(dataset.train_idx, shuffle=True)
        elif hetero:
            self.train_loader = self._hetero_loader(dataset.train_idx, shuffle=True)
        elif self._subgraph is not None:
            if remote_cache is not None:
                raise ValueError("'remote_cache' needs a partitioned graph (a DistData)")
            self.train_loader = self._subgraph.loader(
                dataset.to_data(), seed, num_workers, self.device
            )
        elif isinstance(dataset, DistData):
            self.train_loader = DistNeighborLoader(
                dataset,
                self.fanouts,
                batch_size=self.worker_batch_size,
                shuffle=True,
                seed=seed,
                remote_cache=remote_cache,
                num_workers=num_workers,
                device=self.device,
            )
        else:
            if remote_cache is not None:
                raise ValueError("'remote_cache' needs a partitioned graph (a DistData)")
            loader = LaborLoader if self.sampler == "labor" else NeighborLoader
            features = self._cached_features(dataset, feature_cache)
            casts_x = self._first_layer_casts_x()
            if features is dataset and bf16_features and precision == "bf16" and casts_x:
                features = self._bf16_features(dataset)
            if aggregate_from_store and feature_cache is None:
                features = self._without_x(dataset, features)
            features = self._without_y(dataset, features)
            self.train_loader = loader(
                features,
                self.fanouts,
                batch_size=self.worker_batch_size,
                input_nodes=dataset.train_idx,
                shuffle=True,
                seed=seed,
                num_workers=num_workers,
                device=self.device,
                pin_memory=self.device.type == "cuda",
                rank=self.strategy.rank,
                world_size=self.strategy.world_size,
            )
        if feature_cache is not None and self._cache_counts is None:
            raise ValueError(
                "'feature_cache' caches a GraphDataset's features for the NeighborLoader or "
                "LaborLoader on the CPU"
            )
        if self.checkpoint is not None and self._every_rank_has_checkpoint():
            self.load_checkpoint(self.checkpoint)

    def _cached_features(self, dataset, size: int | str | None):
        """``dataset``, or with ``size``, its graph and a feature store whose ``x`` rows of
        the highest in-degree nodes are cached in memory (``self.feature_store``)."""
        if size is None or not isinstance(dataset, GraphDataset) or self.device.type != "cpu":
            return dataset
        x = dataset.x
        rows = cache_rows(size, x.shape[1] * x.dtype.itemsize, dataset.num_nodes, "feature_cache")
        store = dataset.feature_store()
        store.enable_cache(
            "x", rows * x.shape[1] * x.dtype.itemsize, dataset.graph.in_degree(), "cpu"
        )
        self.feature_store = store
        self._cache_counts = (0, 0)
        return store, dataset.graph

    def _first_layer(self) -> torch.nn.Module | None:
        """The first layer of a PyG ``BasicGNN`` model, else ``None``."""
        convs = getattr(self.model, "convs", None)
        return convs[0] if isinstance(self.model, BasicGNN) and convs else None

    def _first_layer_fuses_sage(self) -> bool:
        """Whether the first layer runs as GraphSAGE's fused mean layer (on blocks)."""
        return fuses(self._first_layer()) and self.forward_mode == "blocks"

    def _first_layer_casts_x(self) -> bool:
        """Whether the model's first layer casts ``x`` to bfloat16 under autocast before
        anything reads it: GAT's shared projection, or GraphSAGE's fused mean layer on
        blocks. Then bfloat16 features change nothing but the bytes gathered."""
        first = self._first_layer()
        if type(first) is GATConv:
            return first.lin is not None
        return self._first_layer_fuses_sage()

    def _without_x(self, dataset, features):
        """``features`` (the dataset, or its graph and a feature store), or, when the first
        layer can read ``x``'s rows from the table itself (see ``aggregate_from_store``),
        its graph and a feature store without ``x`` (``self.feature_store``), the table given
        to the model's forward instead."""
        if (
            not isinstance(dataset, GraphDataset)
            or self.device.type != "cpu"
            or dataset.access == "random"
            or not self._first_layer_fuses_sage()
        ):
            return features
        store = features[0] if isinstance(features, tuple) else dataset.feature_store()
        table = as_tensor(store["x"])
        computes_in_table_dtype = (self.precision == "bf16") == (table.dtype == torch.bfloat16)
        if not uses_kernel(table) or not computes_in_table_dtype:
            return features  # the layer would cast the rows: gathering them costs nothing more
        del store["x"]
        self._seed_logits.features = table
        self.feature_store = store
        log.info("aggregate from store: the first layer reads x's rows from the feature table")
        return store, dataset.graph

    def _without_y(self, dataset, features):
        """``features`` (the dataset, or its graph and a feature store), or, for a
        GraphDataset trained on the CPU, its graph and a feature store without ``y``
        (``self.feature_store``): :meth:`step` reads its seeds' labels from the dataset's
        table (``self._seed_labels``; see :mod:`graphengine.train.labels`)."""
        if not isinstance(dataset, GraphDataset) or self.device.type != "cpu":
            return features
        features = without_labels(dataset, features[0] if isinstance(features, tuple) else None)
        self._seed_labels = as_tensor(dataset.y)
        self.feature_store = features[0]
        return features

    def _bf16_features(self, dataset):
        """``dataset``, or, for a GraphDataset on the CPU, its graph and a feature store whose
        ``x`` is a bfloat16 copy (``self.feature_store``): when the copy takes at most a
        quarter of the memory available and ``x`` is not read as a store larger than memory
        (``access='random'``)."""
        if not isinstance(dataset, GraphDataset) or self.device.type != "cpu":
            return dataset
        copy_bytes = dataset.x.size * 2
        available = available_memory()
        if dataset.access == "random" or available is None or copy_bytes > available // 4:
            log.info(
                "bf16 features: x stays float32 (a %.2f GB copy; %s GB available, access %r)",
                copy_bytes / 1e9,
                "?" if available is None else f"{available / 1e9:.2f}",
                dataset.access,
            )
            return dataset
        store = dataset.feature_store()
        store["x"] = as_tensor(dataset.x).to(torch.bfloat16)
        self.feature_store = store
        return store, dataset.graph

    def feature_cache_metrics(self) -> dict:
        """The feature cache's rows and this epoch's lookups, hits and hit rate."""
        stats = self.feature_store.cache_stats("x")
        hits = stats["hits"] - self._cache_counts[0]
        lookups = stats["lookups"] - self._cache_counts[1]
        self._cache_counts = (stats["hits"], stats["lookups"])
        return {
            "rows": stats["rows"],
            "bytes": stats["rows"] * self.dataset.x.shape[1] * self.dataset.x.dtype.itemsize,
            "policy": "in-degree",
            "lookups": lookups,
            "hits": hits,
            "hit_rate": hits / lookups if lookups else 0.0,
        }

    def _hybrid_loader(self, nodes, shuffle: bool = False) -> HybridNeighborLoader:
        """Hybrid batches: of the training nodes (``shuffle``: all workers pass them, each
        takes its share of every step) or of this worker's evaluation nodes."""
        return HybridNeighborLoader(
            self.dataset,
            self.fanouts,
            self.feature_columns,
            self.strategy.structure,
            batch_size=self.worker_batch_size,
            input_nodes=nodes,
            shuffle=shuffle,
            seed=self.seed if shuffle else self.seed + 1,
            split_seeds=shuffle,
            whole=runs_whole(self._seed_logits),
            num_workers=self.num_workers,
            device=self.device,
        )

    def _hetero_loader(self, nodes, shuffle: bool = False) -> NeighborLoader | list:
        """Heterogeneous batches of target nodes ``nodes``: the training nodes (``shuffle``)
        or evaluation nodes (none: no batches)."""
        if not shuffle and len(nodes) == 0:
            return []
        return NeighborLoader(
            self._hetero_data,
            self.fanouts,
            batch_size=self.worker_batch_size,
            input_nodes=(self._target, np.asarray(nodes, dtype=np.int64)),
            shuffle=shuffle,
            seed=self.seed if shuffle else self.seed + 1,
            num_workers=self.num_workers,
            device=self.device,
            pin_memory=self.device.type == "cuda",
        )

    @property
    def rank(self) -> int:
        return self.strategy.rank

    @property
    def world_size(self) -> int:
        return self.strategy.world_size

    @property
    def eval_mode(self) -> str:
        """How evaluation runs: ``'full'``, ``'layerwise'`` or ``'sampled'``."""
        return self.evaluator.mode

    @property
    def forward_mode(self) -> str:
        """How the model runs on a batch: ``'blocks'``, ``'trim'`` or ``'whole'``."""
        return self._seed_logits.mode

    def fit(
        self,
        epochs: int,
        eval_every: int = 1,
        on_epoch: Callable[[dict], None] | None = None,
    ) -> list[dict]:
        """Train until ``epochs`` epochs are done in total (resumed ones count).

        Returns one metrics dict per epoch run: ``epoch``, ``loss``, ``train_acc``
        (the running accuracy on the epoch's training batches of all workers, with dropout
        on and the weights changing, so it differs from an evaluation's ``train_acc``),
        ``val_acc`` (every ``eval_every`` epochs and at the last; never with
        ``eval_every=0``), ``epoch_s``, ``seeds_per_s`` (all workers),
        ``seeds_per_s_per_worker``, ``workers`` and ``stage_s``, this worker's seconds per
        stage: ``sample``, ``gather``, ``copy`` (in the loader's threads), ``compute`` and
        ``waiting`` (the training thread waiting for a batch).

        ``on_epoch(metrics)`` is called on the writing worker (rank 0) as each epoch ends,
        after its metrics line and checkpoint are written.
        """
        check_schedule(epochs, eval_every)
        history = []
        # One span for all epochs: the blocks freed at the end of one epoch serve the next.
        with host_memory_cache():
            while self.epoch < epochs:
                metrics = self.train_epoch()
                if evaluation_due(self.epoch, epochs, eval_every):
                    metrics["val_acc"] = self.evaluate("val")
                history.append(metrics)
                self._record(metrics)
                if on_epoch is not None and self.strategy.is_writer:
                    on_epoch(metrics)
        self.strategy.assemble_model(self._train_model)  # the user's model whole again
        return history

    def train_epoch(self) -> dict:
        """One pass over the training nodes; returns this epoch's metrics."""
        self._train_model.train()
        self.train_loader.set_epoch(self.epoch)
        if isinstance(self.train_loader, (DistNeighborLoader, HybridNeighborLoader)):
            self.train_loader.reset_stats()  # what evaluation exchanged is not this epoch's
        self.strategy.reset_stats()
        total_loss = correct = seen = feature_bytes = 0
        start = time.perf_counter()
        batches = tqdm(
            self.train_loader,
            desc=f"epoch {self.epoch + 1}",
            disable=not self.progress,
            leave=False,
        )
        compute = 0.0
        io_start = IoCounters.now()
        for batch in batches:
            step_start = time.perf_counter()
            loss, right, size = self.step(batch)
            total_loss += loss * size
            correct += right
            seen += size
            feature_bytes += _feature_bytes(batch)
            compute += time.perf_counter() - step_start
        elapsed = time.perf_counter() - start
        self.epoch += 1
        local_seen = seen
        total_loss, correct, seen = self.strategy.sum([total_loss, correct, seen])
        stages = self.train_loader.stage_times
        stages["compute"] = compute
        metrics = {
            "epoch": self.epoch,
            "loss": total_loss / max(seen, 1),
            "train_acc": correct / max(seen, 1),
            "epoch_s": elapsed,
            "seeds_per_s": seen / elapsed if elapsed > 0 else 0.0,
            "seeds_per_s_per_worker": local_seen / elapsed if elapsed > 0 else 0.0,
            "workers": self.world_size,
            "stage_s": stages,
        }
        if isinstance(self.train_loader, DistNeighborLoader):
            metrics["partition"] = self._partition_metrics()
        metrics["traffic"] = self._traffic_metrics(feature_bytes)
        metrics["io"] = IoCounters.now().since(io_start)
        if self._cache_counts is not None:
            metrics["feature_cache"] = self.feature_cache_metrics()
        return metrics

    def _traffic_metrics(self, feature_bytes: int) -> dict:
        """What this epoch moved, all workers together: ``feature_bytes`` (feature rows read
        into batches), ``gradient_bytes`` (gradients all-reduced, each worker's buckets),
        ``moved_bytes`` (sent between workers: the all-reduce counted as a ring's
        ``2 (W - 1) / W`` of its buckets, plus, for hybrid, the first layers' structures and
        partial results, forward and backward) and ``exchange_seconds_per_worker``
        (hybrid's sharing and partial-result collectives; DDP's all-reduce overlaps the
        backward pass and is not timed)."""
        stats = self.strategy.reset_stats()
        if isinstance(self.train_loader, HybridNeighborLoader):
            stats.update(self.train_loader.reset_stats())
        stats["feature_bytes"] = feature_bytes
        keys = sorted(stats)
        totals = dict(zip(keys, self.strategy.sum([stats[k] for k in keys]), strict=True))
        totals = {k: v if k.endswith("seconds") else int(v) for k, v in totals.items()}
        workers = self.world_size
        ring = 2 * (workers - 1) / workers
        totals["moved_bytes"] = int(
            ring * totals.get("gradient_bytes", 0)
            + totals.get("structure_sent_bytes", 0)
            + totals.get("partial_sent_bytes", 0)
        )
        totals["exchange_seconds_per_worker"] = (
            totals.pop("structure_seconds", 0.0) + totals.pop("partial_seconds", 0.0)
        ) / workers
        return totals

    def _partition_metrics(self) -> dict:
        """What crossed parts this epoch, all workers together (see
        :meth:`DistNeighborLoader.reset_stats`), with the derived ``cut_edge_share`` (sampled
        edges whose source another part owns), ``cache_hit_rate`` and ``remote_bytes``."""
        stats = self.train_loader.reset_stats()
        keys = sorted(stats)
        totals = dict(zip(keys, self.strategy.sum([stats[k] for k in keys]), strict=True))
        totals = {k: v if k.endswith("seconds") else int(v) for k, v in totals.items()}
        totals["cut_edge_share"] = totals["cut_edges"] / max(totals["served_edges"], 1)
        totals["cache_hit_rate"] = totals["cache_hits"] / max(totals["remote_rows"], 1)
        totals["remote_bytes"] = totals["sampling_sent_bytes"] + totals["fetching_sent_bytes"]
        totals["exchange_seconds_per_worker"] = (
            totals["sampling_seconds"] + totals["fetching_seconds"]
        ) / self.world_size
        return totals

    def step(self, batch) -> tuple[float, int, int]:
        """One optimizer step on ``batch`` (its first ``batch_size`` nodes, of the target type
        for a heterogeneous batch, are the seeds; of a subgraph batch, its ``train_mask``
        nodes); returns the mean loss, how many of those nodes were classified right, and
        how many there were. The caller puts the model in training mode (``train_epoch``
        does)."""
        self.optimizer.zero_grad()
        with torch.autocast(
            self.device.type, dtype=torch.bfloat16, enabled=self.precision == "bf16"
        ):
            if self._subgraph is not None:
                batch = batch.to(self.device)
                logits = self._train_model(batch)
                loss, target = subgraph_loss(logits, batch)
            else:
                logits = self._train_model(batch)
                target = seed_labels(seed_store(batch, self._target), self._seed_labels)
                # A worker of a partitioned graph may get no seeds for a step; it still takes
                # part in the gradients' all-reduce, with zeros.
                loss = F.cross_entropy(logits, target) if len(target) else logits.sum() * 0.0
        loss.backward()
        self.optimizer.step()
        right = int((logits.argmax(dim=-1) == target).sum())
        return float(loss.detach()), right, len(target)

    def evaluate(self, split: str) -> float:
        """Accuracy on ``split`` (``'train'``, ``'val'`` or ``'test'``); every worker calls it."""
        return self.evaluator.accuracy(split)

    def evaluate_all(self) -> dict:
        """``train_acc``, ``val_acc`` and ``test_acc`` by the evaluation mode."""
        return self.evaluator.accuracies()

    def save_checkpoint(self, path: str | Path) -> None:
        """Save model, optimizer, epoch and every worker's RNG state so that training can
        resume. With several workers every rank must call it; rank 0 writes."""
        rng_states = self.strategy.gather_objects(torch.get_rng_state())
        self.strategy.assemble_model(self._train_model)
        optimizer = self.optimizer.state_dict()
        if self.strategy.parameters_per_worker:
            optimizer = self.strategy.gather_objects(optimizer)
        if not self.strategy.is_writer:
            return
        state = {
            "model": self.model.state_dict(),
            "optimizer": optimizer,
            "epoch": self.epoch,
            "torch_rng": rng_states,
            "trained_on": trained_on(self.model, self.dataset),
        }
        write_state(path, state)

    def load_checkpoint(self, path: str | Path) -> None:
        """Restore what :meth:`save_checkpoint` saved.

        Raises:
            ValueError: ``path`` is not a graphengine checkpoint, is corrupt, or was
                trained on another model or dataset (the message says what differs).
        """
        state = read_state(path)
        check_trained_on(state.get("trained_on"), trained_on(self.model, self.dataset), path)
        self.model.load_state_dict(state["model"])
        self.strategy.reshard_model(self._train_model)
        self.optimizer.load_state_dict(self._own_optimizer_state(state["optimizer"], path))
        self.epoch = int(state["epoch"])
        rng_states = state["torch_rng"]
        torch.set_rng_state(rng_states[self.rank % len(rng_states)])
        log.info("resumed from %s at epoch %d", path, self.epoch)

    def _own_optimizer_state(self, saved, path: str | Path) -> dict:
        """This worker's optimizer state in a checkpoint: the one state, or, when each worker
        trained parameters of its own (hybrid), its rank's of the list saved."""
        per_worker = isinstance(saved, list)
        if per_worker != self.strategy.parameters_per_worker:
            saved_as = "--parallel hybrid" if per_worker else "one model replica per worker"
            raise ValueError(
                f"checkpoint '{path}' was trained with {saved_as}; resume it the same way"
            )
        if not per_worker:
            return saved
        if len(saved) != self.world_size:
            raise ValueError(
                f"checkpoint '{path}' holds the optimizer states of {len(saved)} hybrid "
                f"workers: resume it with --nproc {len(saved)} (not {self.world_size})"
            )
        return saved[self.rank]

    def _every_rank_has_checkpoint(self) -> bool:
        """Whether every worker finds the checkpoint file (all resume) or none does (all
        start afresh); workers that disagree would run different epochs and wait forever at
        a collective, so that is an error on every rank."""
        found = self.strategy.gather_objects(self.checkpoint.is_file())
        if any(found) and not all(found):
            missing = [rank for rank, has in enumerate(found) if not has]
            raise ValueError(
                f"checkpoint '{self.checkpoint}' exists for some workers but not for ranks "
                f"{missing}: put it where every worker sees it (a shared file system)"
            )
        return all(found)

    def _record(self, metrics: dict) -> None:
        """Log a readable summary of ``metrics``, append them as a JSON line to
        ``metrics_path`` (writer only) and save the checkpoint (every worker takes part)."""
        if self.strategy.is_writer:
            log.info("%s", _summary(metrics))
            if self.metrics_path is not None:
                with self.metrics_path.open("a") as f:
                    f.write(json.dumps(metrics) + "\n")
        if self.checkpoint is not None:
            self.save_checkpoint(self.checkpoint)


def _subgraph_sampling(
    sampler: str | SubgraphSampling, dataset, strategy: Strategy
) -> SubgraphSampling | None:
    """``sampler`` as a :class:`SubgraphSampling`, or ``None`` for neighborhood batches;
    subgraphs need a homogeneous dataset in a single process."""
    if isinstance(sampler, str):
        if sampler not in SAMPLERS:
            raise ValueError(f"'sampler' must be one of {SAMPLERS} (got {sampler!r})")
        if sampler in ("neighbor", "labor"):
            return None
        sampler = SubgraphSampling(sampler)
    if not isinstance(sampler, SubgraphSampling):
        raise TypeError(
            f"'sampler' must be one of {SAMPLERS} or a SubgraphSampling (got {sampler!r})"
        )
    if not isinstance(dataset, GraphDataset):
        raise ValueError(
            f"sampler {sampler.kind!r} trains on subgraphs of a homogeneous, unpartitioned "
            f"dataset (got a {type(dataset).__name__})"
        )
    if strategy.world_size > 1:
        raise ValueError(
            f"sampler {sampler.kind!r} trains in a single process for now (got "
            f"{strategy.world_size} workers)"
        )
    return sampler


def _hybrid_eval_mode(mode: str, dataset) -> str:
    """Hybrid workers hold a share of the feature columns each: they evaluate sampled
    batches the hybrid way, on the whole (unpartitioned) graph."""
    if isinstance(dataset, DistData):
        raise ValueError(
            "--parallel hybrid on a partitioned graph (--partitions) is not available yet; "
            "train the parts with --parallel data"
        )
    if mode not in ("auto", "sampled"):
        raise ValueError(
            f"--parallel hybrid evaluates 'sampled' mini-batches (each worker holds a share of "
            f"the feature columns), not {mode!r}: use --eval sampled or auto"
        )
    return "sampled"


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


def _feature_bytes(batch) -> int:
    """Bytes of feature rows gathered into ``batch``."""
    if isinstance(batch, HeteroData):
        return feature_bytes(batch)
    if hasattr(batch, "feature_bytes"):
        return int(batch.feature_bytes)
    x = getattr(batch, "x", None)
    return 0 if x is None else x.numel() * x.element_size()


def check_schedule(epochs: int, eval_every: int) -> None:
    """Raise ``ValueError`` unless ``epochs`` and ``eval_every`` (0: never) are >= 0."""
    if epochs < 0:
        raise ValueError(f"'epochs' must be >= 0 (got {epochs})")
    if eval_every < 0:
        raise ValueError(f"'eval_every' must be >= 0, 0 for never (got {eval_every})")


def evaluation_due(epoch: int, epochs: int, eval_every: int) -> bool:
    """Whether to evaluate after ``epoch`` (1-based) of ``epochs``: every ``eval_every``
    epochs and after the last, never with ``eval_every=0``."""
    return eval_every > 0 and (epoch % eval_every == 0 or epoch == epochs)


def split_batch(batch_size: int, worker_batch_size: int | None, world_size: int) -> tuple[int, int]:
    """``(global, per-worker)`` batch sizes from the global ``batch_size``, or from
    ``worker_batch_size`` when it is given, for ``world_size`` workers."""
    if worker_batch_size is not None:
        if isinstance(worker_batch_size, bool) or not isinstance(worker_batch_size, int):
            raise TypeError(f"'worker_batch_size' must be an int (got {worker_batch_size!r})")
        if worker_batch_size < 1:
            raise ValueError(f"'worker_batch_size' must be >= 1 (got {worker_batch_size})")
        return worker_batch_size * world_size, worker_batch_size
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"'batch_size' must be an int >= 1 (got {batch_size!r})")
    if batch_size % world_size:
        raise ValueError(
            f"'batch_size' {batch_size} (the global batch) must be a multiple of the "
            f"{world_size} workers; or give each worker 'worker_batch_size' seeds"
        )
    return batch_size, batch_size // world_size


def _summary(metrics: dict) -> str:
    """One readable line for an epoch's ``metrics`` (see :meth:`Trainer.fit`)."""
    parts = [f"epoch {metrics['epoch']}: loss {metrics['loss']:.4f}"]
    parts.append(f"running train_acc {metrics['train_acc']:.4f}")
    if "val_acc" in metrics:
        parts.append(f"val_acc {metrics['val_acc']:.4f}")
    parts.append(f"{metrics['epoch_s']:.2f}s")
    parts.append(f"{metrics['seeds_per_s']:,.0f} seeds/s")
    if "partition" in metrics:
        crossed = metrics["partition"]
        parts.append(
            f"{crossed['remote_bytes'] / 1e6:,.1f} MB exchanged, "
            f"{100 * crossed['cut_edge_share']:.1f}% of sampled edges cut, "
            f"cache hit rate {100 * crossed['cache_hit_rate']:.1f}%"
        )
    stages = " ".join(f"{name} {seconds:.2f}s" for name, seconds in metrics["stage_s"].items())
    return ", ".join(parts) + f" (stages: {stages})"
