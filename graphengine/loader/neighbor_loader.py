"""``NeighborLoader``: a drop-in for PyG's loader of the same name: homogeneous and
heterogeneous graphs, PyG's remote stores, every sampling mode PyG has."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numba
import torch
from torch_geometric.data import Data, HeteroData

from graphengine.datasets.dataset import GraphDataset
from graphengine.loader.adapters import dataloader_options
from graphengine.loader.pipeline import Stage, StageTimes
from graphengine.loader.seeds import BatchRequest, SeedBatches, derive_seed
from graphengine.loader.sources import LoaderParts, LoaderRequest, loader_parts
from graphengine.loader.staged import StagedLoader
from graphengine.loader.stages import CopyToDevice, InWorkerThreads, Transform
from samplers import BaseSampler, check_node_ids


def sampler_threads(num_workers: int) -> int:
    """Numba threads per sampling call when ``num_workers`` threads sample at once: the
    threads Numba may use in the calling thread (``numba.get_num_threads()``: all cores
    unless set lower) shared among them."""
    return max(1, numba.get_num_threads() // max(num_workers, 1))


class NeighborLoader(StagedLoader):
    """Mini-batches of sampled multi-hop neighborhoods, as PyG ``Data`` objects.

    Each batch is a ``Data`` (a ``HeteroData`` for heterogeneous data, per type alike) with
    ``x``, ``y`` and every other node-level attribute of ``data`` sliced by ``n_id``, every
    edge-level attribute sliced by ``e_id``, a local ``edge_index`` (row = sampled neighbor,
    col = the node it was sampled for), ``n_id``, ``e_id``, ``input_id``, ``batch_size``, the
    per-hop counts ``num_sampled_nodes``/``num_sampled_edges`` (not for bidirectional or
    induced subgraphs), and ``batch`` (disjoint) and ``seed_time`` (given seed times) as PyG
    adds them. The first ``batch_size`` nodes are the seeds, in order.

    Loading is a pipeline of stages in threads (sample -> gather -> copy to
    ``device``), overlapped with the caller's work on the previous batch; batches come
    in the same order, with the same contents, as without it.

    Args (PyG's, with PyG's meaning and order):
        data: a PyG ``Data`` or ``HeteroData``, a PyG ``(FeatureStore, GraphStore)`` pair
            (any implementation of PyG's abstract stores: its ``csc()`` is read once, node
            attributes fetched per batch with one ``multi_get_tensor``), a
            :class:`~graphengine.datasets.GraphDataset`, or graphengine's own
            ``(FeatureStore, Graph)`` pair.
        num_neighbors: neighbors per node for each hop, ``-1`` for all; for heterogeneous
            data also a dict ``{edge type: list}`` naming every edge type, or PyG's
            ``NumNeighbors`` (its ``default`` fills the edge types its dict leaves out).
        input_nodes: seed ids (tensor, array or list) or a boolean mask; all nodes by default.
            Heterogeneous: a node type, or ``(node type, ids or mask or None)``.
        input_time: each seed's time (temporal sampling; needs ``time_attr``): a seed samples
            nothing later than it. By default a seed's own node time.
        replace: sample with replacement.
        subgraph_type: ``"directional"`` (the sampled edges), ``"bidirectional"`` (they and
            their reverses, without per-hop counts) or ``"induced"`` (every edge between the
            sampled nodes, without per-hop counts); PyG's ``SubgraphType`` works too.
        disjoint: each seed its own tree; the batch's ``batch`` vector names every node's seed.
        temporal_strategy: ``"uniform"`` or ``"last"`` (the most recent neighbors).
        time_attr: a node- or edge-level attribute of times (integers): temporal sampling,
            always disjoint (as in PyG). Times need not be sorted.
        weight_attr: an edge-level attribute of weights (finite, ``>= 0``): each draw is
            proportional to its edge's weight (see :class:`samplers.NeighborSampler`).
        transform: a function applied to each ``Data`` batch in the caller's thread as the
            batch is handed over (after the copy to ``device``), so that a random transform
            draws in the same order as with ``num_workers=0``, even from torch's global
            generator that the training step also uses.
        transform_sampler_output: a function on each PyG ``SamplerOutput`` before gathering.
        is_sorted: accepted for PyG's sake; the sampler checks the order itself (one pass).
        filter_per_worker: gather features in the sampling threads (``True``, the default
            as in PyG on the CPU: measured fastest here) or in one gathering thread of its
            own (``False``).
        neighbor_sampler: a ready sampler over the same graph to use instead (the sampling
            options are then its own): a :class:`samplers.BaseSampler`, or any PyG
            ``torch_geometric.sampler.BaseSampler`` (called as PyG's loader calls it, its
            output filtered by PyG's own rules; PyG's samplers draw from torch's global
            generator, so set ``num_workers`` to 0 or 1 for repeatable batches).
        directed: deprecated, as in PyG: ``False`` means ``subgraph_type="induced"``.
        batch_size: seeds per batch.
        shuffle: reshuffle the seeds every epoch.
        drop_last: drop the last, incomplete batch.
        seed: base random seed; ``None`` draws one per epoch from torch's global generator.
        num_workers: sampling threads, as PyG's ``num_workers`` counts producers; ``0``
            loads every batch in the caller's thread, without a pipeline. The threads share
            the Numba and torch threads of the thread that builds the loader: each sampling
            call uses ``numba.get_num_threads() // num_workers``, each gathering thread
            ``torch.get_num_threads() // num_workers`` (that thread's own share only).
        prefetch: batches in flight per sampling thread, as torch's ``prefetch_factor`` (also
            accepted under that name): at most ``prefetch * max(num_workers, 1)`` batches are
            being loaded or wait for the caller at any time (memory grows with it).
        device: where batches go; a CUDA device adds a copy stage on a side stream, and
            tables that are pinned (``FeatureStore.pin_memory_``) or cached on the GPU
            (``enable_cache``) are gathered there directly, by zero-copy.
        pin_memory: gather features into pinned memory (for fast host-to-device copies).
        rank, world_size: for data-parallel training: this rank loads only its equal,
            disjoint share of each epoch's seeds (see :class:`SeedBatches`); needs ``seed``.
        input_id: each seed's ``input_id`` (PyG's ``NodeLoader`` argument); positions by
            default.
        custom_cls: the class of batches built from a PyG store pair (PyG's argument).

    ``persistent_workers``, ``timeout`` and ``multiprocessing_context`` are accepted and
    have no effect (threads cost nothing to keep).
    """

    def __init__(
        self,
        data: Data | HeteroData | GraphDataset | tuple,
        num_neighbors: Sequence[int],
        input_nodes=None,
        input_time=None,
        replace: bool = False,
        subgraph_type: str = "directional",
        disjoint: bool = False,
        temporal_strategy: str = "uniform",
        time_attr: str | None = None,
        weight_attr: str | None = None,
        transform: Callable[[Data], Any] | None = None,
        transform_sampler_output: Callable | None = None,
        is_sorted: bool = False,
        filter_per_worker: bool | None = None,
        neighbor_sampler: BaseSampler | None = None,
        directed: bool = True,
        batch_size: int = 1,
        shuffle: bool = False,
        drop_last: bool = False,
        seed: int | None = None,
        num_workers: int = 1,
        prefetch: int = 2,
        device: str | torch.device | None = None,
        pin_memory: bool = False,
        rank: int = 0,
        world_size: int = 1,
        input_id=None,
        custom_cls: type | None = None,
        **kwargs,
    ):
        if not directed:
            warnings.warn(
                "'directed' is deprecated (as in PyG): use subgraph_type='induced' instead",
                DeprecationWarning,
                stacklevel=2,
            )
            subgraph_type = "induced"
        subgraph_type = getattr(subgraph_type, "value", subgraph_type)  # PyG's SubgraphType
        if input_time is not None and time_attr is None:
            raise ValueError(
                "'input_time' is set while 'time_attr' is not: name the node- or edge-level "
                "time attribute the seeds' times compare with"
            )
        prefetch = dataloader_options(kwargs, prefetch, type(self).__name__)
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
        request = LoaderRequest(
            num_neighbors=num_neighbors,
            input_nodes=input_nodes,
            input_time=input_time,
            input_id=input_id,
            time_attr=time_attr,
            weight_attr=weight_attr,
            transform_sampler_output=transform_sampler_output,
            neighbor_sampler=neighbor_sampler,
            custom_cls=custom_cls,
            options={
                "replace": replace,
                "num_threads": sampler_threads(num_workers),
                "disjoint": disjoint,
                "subgraph_type": subgraph_type,
                "temporal_strategy": temporal_strategy,
            },
            pin_memory=pin_memory,
            device=device,
            labor=self._labor_options(),
        )
        parts = self._loader_parts(data, request)

        self.data = data
        self.graph = parts.graph
        self.neighbor_sampler = parts.sampler
        self.num_seeds = parts.num_seeds
        self.transform = transform
        self.num_workers = num_workers
        self.filter_per_worker = True if filter_per_worker is None else bool(filter_per_worker)
        self.prefetch = prefetch
        self.device = device
        self.seed = seed
        self._sample = parts.sample
        self._gather = parts.gather
        self._transform = Transform(transform) if transform is not None else None
        self._copy = (
            CopyToDevice(self.device)
            if self.device is not None and self.device.type == "cuda"
            else None
        )
        self._seed_batches = SeedBatches(
            parts.num_seeds, batch_size, shuffle, drop_last, seed, rank, world_size
        )
        stages = self._build_stages()
        threaded = self._threaded_stages(stages)
        self._set_stages(self._seed_batches, stages, prefetch * max(num_workers, 1), threaded)

    def _loader_parts(self, data, request: LoaderRequest) -> LoaderParts:
        """The sampling and gathering stages and seeds for ``data`` (:mod:`.sources`)."""
        return loader_parts(data, request)

    def _labor_options(self) -> dict | None:
        """LABOR's options when this loader samples by LABOR (:class:`LaborLoader`)."""
        return None

    @property
    def batch_size(self) -> int:
        return self._seed_batches.batch_size

    def __call__(self, index) -> Any:
        """One batch for the given positions into ``input_nodes``, loaded in this thread."""
        index = check_node_ids(index, self.num_seeds, "index")
        request = BatchRequest(index=index, seed=derive_seed(self.seed or 0, -1))
        return self._load(request, StageTimes(stage.name for stage in self._stages))

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"  # as PyG's loaders print

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

    @staticmethod
    def _threaded_stages(stages: list[Stage]) -> list[Stage]:
        """The stages as the pipeline's threads run them: gathering threads share torch's
        intra-op threads of the thread that builds the loader (the sampler shares Numba's
        alike, see :func:`sampler_threads`)."""
        threaded = []
        for stage in stages:
            share = max(1, torch.get_num_threads() // stage.workers)
            if stage.name == "gather" and share < torch.get_num_threads():
                stage = Stage(stage.name, InWorkerThreads(stage.function, share), stage.workers)
            threaded.append(stage)
        return threaded

    def _handed_over(self, batch: Data, times: StageTimes) -> Any:
        """``transform(batch)`` in the caller's thread, so that its random draws (from
        torch's global generator too) interleave with the caller's as without threads."""
        if self._transform is None:
            return batch
        started = time.perf_counter()
        batch = self._transform(batch)
        times.add("transform", time.perf_counter() - started)
        return batch


class LaborLoader(NeighborLoader):
    """:class:`NeighborLoader` with LABOR sampling (layer-neighbor sampling, Balin and
    Catalyurek, NeurIPS 2023; DGL's ``LaborSampler``, see :class:`samplers.LaborSampler`):
    each candidate node draws one variate per hop that every seed shares, so seeds that
    neighbor the same nodes tend to keep the same ones and a batch holds fewer distinct
    nodes than uniform sampling at the same fanouts, for the same expected edges per seed.

    Takes :class:`NeighborLoader`'s arguments for homogeneous data, plus:

    Args:
        importance_sampling: 0 (LABOR-0), ``i >= 1`` fixed-point iterations (LABOR-i), or
            -1 until they converge (LABOR-*); with any, batches carry ``sampling_weight``
            (float32 ``[num_edges]``), DGL's ``edge_weights`` for a weighted mean.
        layer_dependency: every hop reuses the first hop's variates (DGL's argument).

    Weighted, temporal, disjoint, bidirectional or induced sampling and ``replace`` are
    node-wise options: LABOR refuses them.
    """

    def __init__(
        self,
        data,
        num_neighbors: Sequence[int],
        importance_sampling: int = 0,
        layer_dependency: bool = False,
        **kwargs,
    ):
        node_wise = {
            "replace": False,
            "subgraph_type": "directional",
            "disjoint": False,
            "temporal_strategy": "uniform",
            "time_attr": None,
            "weight_attr": None,
            "input_time": None,
            "neighbor_sampler": None,
            "directed": True,
            "transform_sampler_output": None,
        }
        for name, default in node_wise.items():
            value = getattr(kwargs.get(name, default), "value", kwargs.get(name, default))
            if value is not None if default is None else value != default:
                raise ValueError(
                    f"LaborLoader does not take {name}={value!r}: it is an option of node-wise "
                    "sampling; use NeighborLoader for it"
                )
        self._labor = {
            "importance_sampling": importance_sampling,
            "layer_dependency": layer_dependency,
        }
        super().__init__(data, num_neighbors, **kwargs)

    def _loader_parts(self, data, request: LoaderRequest) -> LoaderParts:
        """The sampling and gathering stages and seeds for ``data`` (:mod:`.sources`)."""
        return loader_parts(data, request)

    def _labor_options(self) -> dict | None:
        return self._labor
