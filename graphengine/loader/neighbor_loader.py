"""``NeighborLoader``: a drop-in for PyG's loader of the same name on homogeneous graphs."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch_geometric.data import Data

from graphengine.datasets.dataset import GraphDataset
from graphengine.feature_store import FeatureStore, as_tensor
from graphengine.graph import Graph
from graphengine.loader.batch import BatchBuilder
from graphengine.loader.seeds import BatchRequest, SeedBatches, derive_seed
from samplers import NeighborSampler, SamplerInput, SamplerOutput, check_node_ids

_UNSUPPORTED = {
    "input_time": None,
    "time_attr": None,
    "weight_attr": None,
    "transform_sampler_output": None,
    "disjoint": False,
    "subgraph_type": "directional",
    "temporal_strategy": "uniform",
}
_DATALOADER_OWNED = ("dataset", "collate_fn", "sampler", "batch_sampler")


class _Requests(torch.utils.data.Dataset):
    """The DataLoader's dataset: it hands each :class:`BatchRequest` through unchanged."""

    def __init__(self, num_seeds: int):
        self.num_seeds = num_seeds

    def __len__(self) -> int:
        return self.num_seeds

    def __getitem__(self, request: BatchRequest) -> BatchRequest:
        return request


class _Collate:
    """Samples one batch and, when filtering per worker, builds its ``Data`` too."""

    def __init__(self, sampler, input_nodes, input_ids, build: BatchBuilder | None):
        self.sampler = sampler
        self.input_nodes = input_nodes
        self.input_ids = input_ids
        self.build = build

    def __call__(self, request: BatchRequest) -> Data | SamplerOutput:
        out = self.sampler.sample_from_nodes(
            SamplerInput(
                node=self.input_nodes[request.index],
                input_id=self.input_ids[request.index],
                seed=request.seed,
            )
        )
        return out if self.build is None else self.build(out)


class NeighborLoader(torch.utils.data.DataLoader):
    """Mini-batches of sampled multi-hop neighborhoods, as PyG ``Data`` objects.

    Each batch has ``x``, ``y`` and every other node-level attribute of ``data``
    sliced by ``n_id``, every edge-level attribute sliced by ``e_id``, a local
    ``edge_index`` (row = sampled neighbor, col = the node it was sampled for),
    ``n_id``, ``e_id``, ``input_id``, ``batch_size`` and the per-hop counts
    ``num_sampled_nodes``/``num_sampled_edges``. The first ``batch_size`` nodes are
    the seeds, in order.

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
        transform: a function applied to each ``Data`` batch.
        filter_per_worker: build ``Data`` batches (gather features) in the worker
            processes (``True``, PyG's default on CPU) or in the main process.
        neighbor_sampler: a ready :class:`samplers.NeighborSampler` to use instead.
        **kwargs: arguments of ``torch.utils.data.DataLoader`` (``num_workers``,
            ``persistent_workers``, ``pin_memory``, ...). Worker processes start by
            ``forkserver`` unless ``multiprocessing_context`` says otherwise: a fork
            of a process whose Numba kernels ran under OpenMP would abort.

    PyG arguments for temporal, weighted or disjoint sampling raise
    ``NotImplementedError``.
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
        filter_per_worker: bool | None = None,
        neighbor_sampler: NeighborSampler | None = None,
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
        for name in _DATALOADER_OWNED:
            kwargs.pop(name, None)
        if kwargs.get("num_workers", 0) > 0:
            # Numba's OpenMP thread pool aborts in a forked child: start workers fresh.
            kwargs.setdefault("multiprocessing_context", "forkserver")

        graph, build = _prepare(data)
        if neighbor_sampler is None:
            neighbor_sampler = NeighborSampler(
                graph.indptr, graph.indices, num_neighbors, replace=replace, validate=False
            )
        input_nodes, input_ids = _input_nodes(input_nodes, graph.num_nodes)
        if filter_per_worker is None:
            filter_per_worker = not (isinstance(data, Data) and data.is_cuda)

        self.data = data
        self.graph = graph
        self.neighbor_sampler = neighbor_sampler
        self.input_nodes = input_nodes
        self.transform = transform
        self.filter_per_worker = filter_per_worker
        self.seed = seed
        self._build = build
        self._collate = _Collate(
            neighbor_sampler, input_nodes, input_ids, build if filter_per_worker else None
        )
        self._seed_batches = SeedBatches(len(input_nodes), batch_size, shuffle, drop_last, seed)
        super().__init__(
            _Requests(len(input_nodes)),
            batch_size=None,
            sampler=self._seed_batches,
            collate_fn=self._collate,
            **kwargs,
        )

    def __iter__(self) -> Iterator[Any]:
        for out in super().__iter__():
            yield self._finish(out)

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration epoch ``epoch``: its order and samples follow from ``seed``."""
        self._seed_batches.epoch = epoch

    def __call__(self, index) -> Any:
        """One batch for the given positions into ``input_nodes``."""
        index = check_node_ids(index, len(self.input_nodes), "index")
        out = self._collate(BatchRequest(index=index, seed=derive_seed(self.seed or 0, -1)))
        return self._finish(out)

    def _finish(self, out: Data | SamplerOutput) -> Any:
        data = out if isinstance(out, Data) else self._build(out)
        return data if self.transform is None else self.transform(data)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(num_seeds={len(self.input_nodes)}, "
            f"batch_size={self._seed_batches.batch_size}, "
            f"num_neighbors={list(self.neighbor_sampler.fanouts)}, "
            f"replace={self.neighbor_sampler.replace}, num_workers={self.num_workers})"
        )


def _prepare(data) -> tuple[Graph, BatchBuilder]:
    """The graph store and batch builder of a ``Data``, a ``GraphDataset`` or a
    ``(FeatureStore, Graph)`` pair."""
    if isinstance(data, GraphDataset):
        return data.graph, BatchBuilder(FeatureStore({"x": data.x, "y": data.y}))
    if isinstance(data, tuple) and len(data) == 2 and isinstance(data[1], Graph):
        store, graph = data
        if not isinstance(store, FeatureStore) or store.num_nodes != graph.num_nodes:
            raise ValueError("'data' as a pair must be (FeatureStore, Graph) of as many nodes")
        return graph, BatchBuilder(store, edge_ids=graph.edge_ids)
    if not isinstance(data, Data):
        raise TypeError(
            f"'data' must be a torch_geometric.data.Data, a graphengine GraphDataset or a "
            f"(FeatureStore, Graph) pair (got {type(data).__name__}); HeteroData and PyG's "
            "remote stores are not supported yet"
        )
    graph = Graph.from_data(data)
    tables = {"node": {}, "edge": {}}
    other_attrs, odd_attrs = {}, {}
    for key, value in data.items():
        if key in ("edge_index", "num_nodes"):
            continue
        if data.is_node_attr(key):
            level = "node"
        elif data.is_edge_attr(key):
            level = "edge"
        else:
            other_attrs[key] = value
            continue
        dim = data.__cat_dim__(key, value)
        if dim == 0 and _row_table(value):
            tables[level][key] = value
        else:
            odd_attrs[key] = (value, dim, level)
    nodes, edges = (FeatureStore(t) if t else None for t in (tables["node"], tables["edge"]))
    return graph, BatchBuilder(nodes, edges, other_attrs, graph.edge_ids, odd_attrs)


def _row_table(value) -> bool:
    """Whether ``value`` is a CPU table the extension gathers rows of (1-D, or 2-D rows
    contiguous)."""
    if isinstance(value, np.ndarray):
        value = as_tensor(value)
    if not isinstance(value, torch.Tensor) or value.is_cuda or value.dim() not in (1, 2):
        return False
    return value.dim() == 1 or value.shape[1] <= 1 or value.stride(1) == 1


def _input_nodes(input_nodes, num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Seed ids and their ``input_id`` (positions, or node ids for a boolean mask)."""
    if input_nodes is None:
        nodes = np.arange(num_nodes, dtype=np.int64)
        return nodes, nodes
    if isinstance(input_nodes, torch.Tensor):
        input_nodes = input_nodes.detach().cpu().numpy()
    array = np.asarray(input_nodes)
    if array.dtype == np.bool_:
        if array.shape != (num_nodes,):
            raise ValueError(
                f"'input_nodes' as a mask must have shape ({num_nodes},) (got {array.shape})"
            )
        nodes = np.flatnonzero(array).astype(np.int64)
        return nodes, nodes
    nodes = check_node_ids(array, num_nodes, "input_nodes")
    return nodes, np.arange(nodes.shape[0], dtype=np.int64)
