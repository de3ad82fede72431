"""``NeighborLoader``: a drop-in for PyG's loader of the same name on homogeneous graphs."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numba
import torch
from torch_geometric.data import Data

from graphengine.datasets.dataset import GraphDataset
from graphengine.loader.adapters import graph_and_gather, seed_nodes
from graphengine.loader.pipeline import Pipeline, Stage, StageTimes
from graphengine.loader.seeds import BatchRequest, SeedBatches, derive_seed
from graphengine.loader.stages import CopyToDevice, InWorkerThreads, SampleNodes, Transform
from samplers import NeighborSampler, check_fanouts, check_node_ids

_UNSUPPORTED = {
    "input_time": None,
    "time_attr": None,
    "weight_attr": None,
    "transform_sampler_output": None,
    "disjoint": False,
    "subgraph_type": "directional",
    "temporal_strategy": "uniform",
}
_DATALOADER_ARGS_IGNORED = ("persistent_workers",)


def sampler_threads(num_workers: int) -> int:
    """Numba threads per sampling call when ``num_workers`` threads sample at once: the
    threads Numba may use in the calling thread (``numba.get_num_threads()``: all cores
    unless set lower) shared among them."""
    return max(1, numba.get_num_threads() // max(num_workers, 1))


class NeighborLoader:
    """Mini-batches of sampled multi-hop neighborhoods, as PyG ``Data`` objects.

    Each batch has ``x``, ``y`` and every other node-level attribute of ``data``
    sliced by ``n_id``, every edge-level attribute sliced by ``e_id``, a local
    ``edge_index`` (row = sampled neighbor, col = the node it was sampled for),
    ``n_id``, ``e_id``, ``input_id``, ``batch_size`` and the per-hop counts
    ``num_sampled_nodes``/``num_sampled_edges``. The first ``batch_size`` nodes are
    the seeds, in order.

    Loading is a pipeline of stages in threads (sample -> gather -> copy to
    ``device``), overlapped with the caller's work on the previous batch; batches come
    in the same order, with the same contents, as without it.

    Args:
        data: a PyG ``Data`` (homogeneous), a :class:`~graphengine.datasets.GraphDataset`,
            or a ``(FeatureStore, Graph)`` pair.
        num_neighbors: neighbors per node for each hop, ``-1`` for all.
        batch_size: seeds per batch.
        input_nodes: seed ids (tensor, array or list) or a boolean mask; all nodes by default.
        shuffle: reshuffle the seeds every epoch.
        replace: sample with replacement.
        drop_last: drop the last, incomplete batch.
        seed: base random seed; ``None`` draws one per epoch from torch's global generator.
        transform: a function applied to each ``Data`` batch in the caller's thread as the
            batch is handed over (after the copy to ``device``), so that a random transform
            draws in the same order as with ``num_workers=0``, even from torch's global
            generator that the training step also uses.
        num_workers: sampling threads, as PyG's ``num_workers`` counts producers; ``0``
            loads every batch in the caller's thread, without a pipeline. The threads share
            the Numba and torch threads of the thread that builds the loader: each sampling
            call uses ``numba.get_num_threads() // num_workers``, each gathering thread
            ``torch.get_num_threads() // num_workers`` (that thread's own share only).
        filter_per_worker: gather features in the sampling threads (``True``, the default
            as in PyG on the CPU: measured fastest here) or in one gathering thread of its
            own (``False``).
        prefetch: batches in flight per sampling thread, as torch's ``prefetch_factor``:
            at most ``prefetch * max(num_workers, 1)`` batches are being loaded or wait
            for the caller at any time (memory grows with it).
        device: where batches go; a CUDA device adds a copy stage on a side stream, and
            tables that are pinned (``FeatureStore.pin_memory_``) or cached on the GPU
            (``enable_cache``) are gathered there directly, by zero-copy.
        pin_memory: gather features into pinned memory (for fast host-to-device copies).
        neighbor_sampler: a ready :class:`samplers.NeighborSampler` over the same graph to
            use instead (``num_neighbors`` and ``replace`` are then its own).
        rank, world_size: for data-parallel training: this rank loads only its equal,
            disjoint share of each epoch's seeds (see :class:`SeedBatches`); needs ``seed``.

    PyG arguments for temporal, weighted or disjoint sampling raise
    ``NotImplementedError``; ``persistent_workers`` is accepted and has no effect
    (threads cost nothing to keep).
    """

    def __init__(
        self,
        data: Data | GraphDataset,
        num_neighbors: Sequence[int],
        batch_size: int = 1,
        input_nodes=None,
        shuffle: bool = False,
        replace: bool = False,
        drop_last: bool = False,
        seed: int | None = None,
        transform: Callable[[Data], Any] | None = None,
        num_workers: int = 1,
        filter_per_worker: bool | None = None,
        prefetch: int = 2,
        device: str | torch.device | None = None,
        pin_memory: bool = False,
        neighbor_sampler: NeighborSampler | None = None,
        rank: int = 0,
        world_size: int = 1,
        is_sorted: bool = False,
        directed: bool = True,
        **kwargs,
    ):
        for name, default in _UNSUPPORTED.items():
            value = kwargs.pop(name, default)
            if value != default:
                raise NotImplementedError(
                    f"graphengine's NeighborLoader does not support '{name}' yet (got {value!r})"
                )
        if not directed:
            raise NotImplementedError("'directed=False' (undirected subgraphs) is not supported")
        for name in _DATALOADER_ARGS_IGNORED:
            kwargs.pop(name, None)
        if kwargs:
            raise TypeError(
                f"NeighborLoader got arguments it does not support: {sorted(kwargs)}; loading "
                "runs in threads, so worker-process options do not apply"
            )
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError(f"'num_workers' must be an int >= 0 (got {num_workers!r})")
        if isinstance(prefetch, bool) or not isinstance(prefetch, int) or prefetch < 1:
            raise ValueError(f"'prefetch' must be an int >= 1 (got {prefetch!r})")
        if pin_memory and not torch.cuda.is_available():
            warnings.warn(
                "'pin_memory=True' needs CUDA and torch.cuda.is_available() is False: batches "
                "are gathered into ordinary memory",
                UserWarning,
                stacklevel=2,
            )  # as torch's DataLoader does
            pin_memory = False

        device = torch.device(device) if device is not None else None
        graph, gather = graph_and_gather(data, pin_memory, device)
        if neighbor_sampler is not None and neighbor_sampler.num_nodes != graph.num_nodes:
            raise ValueError(
                f"'neighbor_sampler' samples a graph of {neighbor_sampler.num_nodes} nodes, "
                f"'data' has {graph.num_nodes}"
            )
        if neighbor_sampler is None:
            graph.validate()  # once per graph: the kernels do not check bounds
            neighbor_sampler = NeighborSampler(
                graph.indptr,
                graph.indices,
                check_fanouts(num_neighbors, "num_neighbors"),
                replace=replace,
                validate=False,
                num_threads=sampler_threads(num_workers),
            )
        input_nodes, input_ids = seed_nodes(input_nodes, graph.num_nodes)

        self.data = data
        self.graph = graph
        self.neighbor_sampler = neighbor_sampler
        self.input_nodes = input_nodes
        self.transform = transform
        self.num_workers = num_workers
        self.filter_per_worker = True if filter_per_worker is None else bool(filter_per_worker)
        self.prefetch = prefetch
        self.device = device
        self.seed = seed
        self._sample = SampleNodes(neighbor_sampler, input_nodes, input_ids)
        self._gather = gather
        self._transform = Transform(transform) if transform is not None else None
        self._copy = (
            CopyToDevice(self.device)
            if self.device is not None and self.device.type == "cuda"
            else None
        )
        self._seed_batches = SeedBatches(
            len(input_nodes), batch_size, shuffle, drop_last, seed, rank, world_size
        )
        self._stages = self._build_stages()
        self._pipeline = Pipeline(
            self._seed_batches, self._threaded_stages(), prefetch=prefetch * max(num_workers, 1)
        )
        self._times = self._pipeline.times

    @property
    def batch_size(self) -> int:
        return self._seed_batches.batch_size

    def __len__(self) -> int:
        return len(self._seed_batches)

    def __iter__(self) -> Iterator[Any]:
        if self.num_workers == 0:
            return self._iterate_inline()
        return self._iterate_pipelined()

    @property
    def stage_times(self) -> dict[str, float]:
        """Seconds spent per stage (``sample``, ``gather``, ``copy``, ``transform``) and
        ``waiting`` in the caller, in the current or last pass."""
        return self._times.snapshot()

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration epoch ``epoch``: its order and samples follow from ``seed``."""
        self._seed_batches.epoch = epoch

    def __call__(self, index) -> Any:
        """One batch for the given positions into ``input_nodes``, loaded in this thread."""
        index = check_node_ids(index, len(self.input_nodes), "index")
        request = BatchRequest(index=index, seed=derive_seed(self.seed or 0, -1))
        return self._load(request, StageTimes(stage.name for stage in self._stages))

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(num_seeds={len(self.input_nodes)}, "
            f"batch_size={self.batch_size}, "
            f"num_neighbors={list(self.neighbor_sampler.fanouts)}, "
            f"replace={self.neighbor_sampler.replace}, num_workers={self.num_workers}, "
            f"device={self.device})"
        )

    def _build_stages(self) -> list[Stage]:
        workers = max(self.num_workers, 1)
        gatherers = workers if self.filter_per_worker else 1
        stages = [
            Stage("sample", self._sample, workers),
            Stage("gather", self._gather, gatherers),
        ]
        if self._copy is not None:
            stages.append(Stage("copy", self._copy))
        return stages

    def _threaded_stages(self) -> list[Stage]:
        """The stages as the pipeline's threads run them: gathering threads share torch's
        intra-op threads of the thread that builds the loader (the sampler shares Numba's
        alike, see :func:`sampler_threads`)."""
        stages = []
        for stage in self._stages:
            share = max(1, torch.get_num_threads() // stage.workers)
            if stage.name == "gather" and share < torch.get_num_threads():
                stage = Stage(stage.name, InWorkerThreads(stage.function, share), stage.workers)
            stages.append(stage)
        return stages

    def _iterate_inline(self) -> Iterator[Any]:
        self._times = StageTimes(stage.name for stage in self._stages)
        for request in self._seed_batches:
            yield self._load(request, self._times)

    def _iterate_pipelined(self) -> Iterator[Any]:
        batches = iter(self._pipeline)
        self._times = self._pipeline.times
        try:
            for batch in batches:
                yield self._transformed(batch, self._times)
        finally:
            batches.close()  # stops the pipeline's threads when the caller leaves early

    def _load(self, request: BatchRequest, times: StageTimes) -> Any:
        item = request
        for stage in self._stages:
            started = time.perf_counter()
            item = stage.function(item)
            times.add(stage.name, time.perf_counter() - started)
        return self._transformed(item, times)

    def _transformed(self, batch: Data, times: StageTimes) -> Any:
        """``transform(batch)`` in the caller's thread, so that its random draws (from
        torch's global generator too) interleave with the caller's as without threads."""
        if self._transform is None:
            return batch
        started = time.perf_counter()
        batch = self._transform(batch)
        times.add("transform", time.perf_counter() - started)
        return batch
