"""``NeighborLoader``: a drop-in for PyG's loader of the same name: homogeneous and
heterogeneous graphs, PyG's remote stores, every sampling mode PyG has; and ``LaborLoader``,
the same loader sampling by LABOR."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch_geometric.data import Data, HeteroData

from graphengine.datasets.dataset import GraphDataset
from graphengine.loader.config import (
    LoadingConfig,
    SamplingConfig,
    loading_config,
    subgraph_type_of,
)
from graphengine.loader.device_sampling import sampling_device
from graphengine.loader.pipeline import StagedLoader
from graphengine.loader.sources import (
    gather_through_pyg,
    graph_source,
    is_pyg_sampler,
    is_pyg_store_pair,
    pyg_node_stages,
    sample_nodes,
)
from graphengine.loader.threads import sampler_threads
from samplers import BaseSampler


class NeighborLoader(StagedLoader):
    """Mini-batches of sampled multi-hop neighborhoods, as PyG ``Data`` objects.

    Each batch is a ``Data`` (a ``HeteroData`` for heterogeneous data, per type alike) with
    ``x``, ``y`` and every other node-level attribute of ``data`` sliced by ``n_id``, every
    edge-level attribute sliced by ``e_id``, a local ``edge_index`` (row = sampled neighbor,
    col = the node it was sampled for), ``n_id``, ``e_id``, ``input_id``, ``batch_size``, the
    per-hop counts ``num_sampled_nodes``/``num_sampled_edges`` (not for bidirectional or
    induced subgraphs), and ``batch`` (disjoint) and ``seed_time`` (given seed times) as PyG
    adds them. The first ``batch_size`` nodes are the seeds, in order.

    Loading is seeds -> stages: the arguments become a
    :class:`~graphengine.loader.config.SamplingConfig` and a
    :class:`~graphengine.loader.config.LoadingConfig`; :mod:`.sources` builds the sampler
    and the gathering for ``data``; the stages (sample -> gather -> copy to ``device``) run
    in threads (:class:`~graphengine.loader.pipeline.StagedLoader`), overlapped with the
    caller's work on the previous batch; batches come in the same order, with the same
    contents, as without threads.

    The arguments are PyG's, with PyG's meaning and order, and graphengine's own after them.

    Args:
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
        filter_per_worker: gather features in the sampling threads (``True``, the default,
            as in PyG on the CPU: each batch is then gathered by the thread that sampled it,
            while it is fresh in that core's cache) or in one gathering thread of its own
            (``False``).
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
            (``enable_cache``) are gathered there directly, by zero-copy. A CUDA device
            also samples there by default (see ``sample_on``).
        sample_on: where batches are sampled: ``"cpu"``, ``"cuda"`` (``"cuda:N"``), or
            ``None`` (the default): on the GPU that ``device`` names, when Numba's CUDA
            target (``numba-cuda``) finds it and the options are ones the GPU kernels draw
            (homogeneous, node-wise, unweighted, directional), else on the CPU. On the GPU
            the graph sits in its memory (or, when it takes more than half the free memory,
            in page-locked host memory the GPU reads), the feature tables are pinned and
            gathered there by zero-copy or from a GPU cache, and no id of a batch passes
            through the host; the batches equal the CPU's (see
            :mod:`graphengine.loader.device_sampling`).
        pin_memory: gather features into pinned memory (for fast host-to-device copies).
        feature_dtype: the dtype the batch's gathered floating node and edge attributes come
            in, cast after the gather on its device: ``None`` (the default) hands a float16
            table's rows (a ``graphengine compact`` store) over as float32 and the others as
            they are; a floating ``torch.dtype`` casts them to it (``torch.float16`` keeps
            half rows half). A PyG store pair's batches are PyG's.
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
        feature_dtype: torch.dtype | None = None,
        rank: int = 0,
        world_size: int = 1,
        input_id=None,
        custom_cls: type | None = None,
        sample_on: str | torch.device | None = None,
        **kwargs,
    ):
        subgraph_type = subgraph_type_of(subgraph_type, directed)
        if input_time is not None and time_attr is None:
            raise ValueError(
                "'input_time' is set while 'time_attr' is not: name the node- or edge-level "
                "time attribute the seeds' times compare with"
            )
        sampling = SamplingConfig(
            num_neighbors,
            replace=replace,
            disjoint=disjoint,
            subgraph_type=subgraph_type,
            temporal_strategy=temporal_strategy,
            time_attr=time_attr,
            weight_attr=weight_attr,
        )
        loading = loading_config(
            type(self).__name__,
            {
                **kwargs,
                "batch_size": batch_size,
                "shuffle": shuffle,
                "drop_last": drop_last,
                "seed": seed,
                "num_workers": num_workers,
                "prefetch": prefetch,
                "device": device,
                "pin_memory": pin_memory,
                "feature_dtype": feature_dtype,
                "rank": rank,
                "world_size": world_size,
                "filter_per_worker": filter_per_worker,
            },
        )
        self._compose(
            data,
            sampling,
            loading,
            input_nodes=input_nodes,
            input_time=input_time,
            input_id=input_id,
            neighbor_sampler=neighbor_sampler,
            transform=transform,
            transform_sampler_output=transform_sampler_output,
            custom_cls=custom_cls,
            sample_on=sample_on,
        )

    def _compose(
        self,
        data,
        sampling: SamplingConfig,
        loading: LoadingConfig,
        *,
        input_nodes,
        input_time,
        input_id,
        neighbor_sampler,
        transform,
        transform_sampler_output,
        custom_cls,
        sample_on=None,
    ) -> None:
        """Seeds -> sample -> gather -> copy for ``data``: graphengine's sampler and
        gathering (:mod:`.sources`), or a user's PyG sampler's own stages; sampled on the
        CPU or, for ``sample_on`` (see :func:`.device_sampling.sampling_device`), a GPU."""
        graph = None
        if is_pyg_sampler(neighbor_sampler):
            sample, gather = pyg_node_stages(
                data,
                neighbor_sampler,
                input_nodes,
                input_time,
                input_id,
                custom_cls,
                transform_sampler_output,
            )
            num_seeds = int(sample.input_data.node.numel())
        else:
            homogeneous = (
                neighbor_sampler is None
                and transform_sampler_output is None
                and not isinstance(data, HeteroData)
                and not is_pyg_store_pair(data)
            )
            source = graph_source(
                data,
                sampling,
                sampler_threads(loading.num_workers),
                neighbor_sampler,
                loading.pin_memory,
                loading.device,
                custom_cls,
                sampling_device(
                    sample_on, loading, sampling, homogeneous, sampling.weight_attr is not None
                ),
                feature_dtype=loading.feature_dtype,
            )
            sample = sample_nodes(source, input_nodes, input_time, input_id)
            gather = source.gather
            if transform_sampler_output is not None:
                gather = gather_through_pyg(
                    data, source, sample.input_type, custom_cls, transform_sampler_output
                )
            graph, neighbor_sampler = source.graph, source.sampler
            num_seeds = sample.input_nodes.shape[0]
        self.data = data
        self.sampling = sampling
        self.graph = graph
        self.neighbor_sampler = neighbor_sampler
        self._run_seed_batches(num_seeds, loading, sample, gather, transform)

    @property
    def batch_size(self) -> int:
        return self.loading.batch_size

    def __call__(self, index) -> Any:
        """One batch for the given positions into ``input_nodes``, loaded in this thread."""
        return self._load_positions(index)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"  # as PyG's loaders print


class LaborLoader(NeighborLoader):
    """:class:`NeighborLoader` with LABOR sampling (layer-neighbor sampling, Balin and
    Catalyurek, NeurIPS 2023; DGL's ``LaborSampler``, see :class:`samplers.LaborSampler`):
    each candidate node draws one variate per hop that every seed shares, so seeds that
    neighbor the same nodes tend to keep the same ones and a batch holds fewer distinct
    nodes than uniform sampling at the same fanouts, for the same expected edges per seed.

    Takes :class:`NeighborLoader`'s arguments for homogeneous data, plus:

    Args:
        importance_sampling: 0 (LABOR-0), ``i >= 1`` fixed-point iterations (LABOR-i), or
            -1 until they converge (``LABOR-*``); with any, batches carry ``sampling_weight``
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
        for name in ("input_time", "neighbor_sampler", "transform_sampler_output"):
            if kwargs.get(name) is not None:
                raise ValueError(
                    f"LaborLoader does not take {name}={kwargs[name]!r}: it is an option of "
                    "node-wise sampling; use NeighborLoader for it"
                )
        if not kwargs.pop("directed", True):
            raise ValueError(
                "LaborLoader does not take directed=False: it is an option of node-wise "
                "sampling; use NeighborLoader for it"
            )
        for name in ("input_time", "neighbor_sampler", "transform_sampler_output", "is_sorted"):
            kwargs.pop(name, None)
        sampling = SamplingConfig(
            num_neighbors,
            kind="labor",
            importance_sampling=importance_sampling,
            layer_dependency=layer_dependency,
            **_take(kwargs, _NODE_WISE),
        )
        nodes = _take(kwargs, ("input_nodes", "input_id", "transform", "custom_cls", "sample_on"))
        loading = loading_config(type(self).__name__, kwargs)
        self._compose(
            data,
            sampling,
            loading,
            input_nodes=nodes.get("input_nodes"),
            input_time=None,
            input_id=nodes.get("input_id"),
            neighbor_sampler=None,
            transform=nodes.get("transform"),
            transform_sampler_output=None,
            custom_cls=nodes.get("custom_cls"),
            sample_on=nodes.get("sample_on"),
        )


# NeighborLoader's arguments that become SamplingConfig fields: LABOR refuses them.
_NODE_WISE = (
    "replace",
    "subgraph_type",
    "disjoint",
    "temporal_strategy",
    "time_attr",
    "weight_attr",
)


def _take(kwargs: dict, names: Sequence[str]) -> dict:
    """The entries of ``kwargs`` named ``names``, removed from it."""
    return {name: kwargs.pop(name) for name in names if name in kwargs}
