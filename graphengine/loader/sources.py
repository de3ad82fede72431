"""What a sampling loader samples and gathers, for each kind of ``data`` PyG's loaders take:
a ``Data`` (or graphengine's own dataset and stores), a ``HeteroData`` or a PyG
``(FeatureStore, GraphStore)`` pair. :func:`graph_source` gives the structure, the sampler
built from a :class:`~graphengine.loader.config.SamplingConfig` and the gathering stage;
:func:`sample_nodes` the node loaders' sampling stage over it. A user's PyG sampler brings
its own stages (:func:`pyg_node_stages`)."""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch_geometric.data import Data, HeteroData
from torch_geometric.data import FeatureStore as PyGFeatureStore
from torch_geometric.data import GraphStore as PyGGraphStore
from torch_geometric.sampler import BaseSampler as PyGBaseSampler

from graphengine.data.arrays import as_tensor
from graphengine.data.feature_store import FeatureStore
from graphengine.data.graph_store import Graph
from graphengine.datasets.dataset import GraphDataset
from graphengine.loader.adapters import (
    as_numpy,
    check_attribute_rows,
    check_input_ids,
    seed_ids,
)
from graphengine.loader.config import SamplingConfig
from graphengine.loader.device_sampling import TorchDeviceMemory
from graphengine.loader.hetero import (
    GatherHeteroFeatures,
    HeteroGraph,
    hetero_sampling_attributes,
    hetero_seed_nodes,
)
from graphengine.loader.pyg_interop import (
    GatherPyGOutput,
    GatherRemoteFeatures,
    PyGRemoteGraph,
    SamplePyGNodes,
    to_pyg_sampler_output,
)
from graphengine.loader.stages import GatherFeatures, SampleNodes
from samplers import (
    BaseSampler,
    HeteroNeighborSampler,
    LaborSampler,
    NeighborSampler,
    check_times,
)


@dataclass
class GraphSource:
    """The graph a loader samples, its sampler, and the gathering of its batches.

    Attributes:
        graph: the structure: a ``Graph``, ``HeteroGraph`` or ``PyGRemoteGraph``.
        sampler: the :class:`samplers.BaseSampler` in use (built, or the user's).
        gather: the sampler's output -> a ``Data`` or ``HeteroData`` batch.
        edge_times: ``time_attr`` names edge-level times (the seeds then need their own).
    """

    graph: Any
    sampler: BaseSampler
    gather: Callable[[Any], Any]
    edge_times: bool = False

    @property
    def is_hetero(self) -> bool:
        return isinstance(self.graph, HeteroGraph) or getattr(self.graph, "is_hetero", False)


def graph_source(
    data,
    sampling: SamplingConfig,
    num_threads: int,
    neighbor_sampler: BaseSampler | None = None,
    pin_memory: bool = False,
    device: torch.device | None = None,
    custom_cls: type | None = None,
    sample_device: torch.device | None = None,
    feature_dtype: torch.dtype | None = None,
) -> GraphSource:
    """The :class:`GraphSource` of ``data``: its sampler built from ``sampling`` (with
    ``num_threads`` Numba threads per call) unless ``neighbor_sampler`` is given; batches
    gathered for ``device`` (into pinned memory with ``pin_memory``), those of a store pair
    as ``custom_cls`` (PyG's argument). With ``sample_device`` (a GPU, for homogeneous data,
    see :func:`~graphengine.loader.device_sampling.sampling_device`) the sampler draws there
    and the feature tables are pinned, so that the GPU gathers them by zero-copy with the ids
    it sampled. ``feature_dtype``: the dtype gathered floating rows are handed over in
    (:func:`graphengine.data.feature_dtype.as_batch_dtype`; a PyG store pair's batches are
    PyG's, as they are)."""
    if neighbor_sampler is not None and not isinstance(neighbor_sampler, BaseSampler):
        raise TypeError(
            "'neighbor_sampler' must be a samplers.BaseSampler or a "
            f"torch_geometric.sampler.BaseSampler (got {type(neighbor_sampler).__name__})"
        )
    if isinstance(data, HeteroData):
        return _heterogeneous(data, sampling, num_threads, neighbor_sampler, feature_dtype)
    if is_pyg_store_pair(data):
        return _remote(data, sampling, num_threads, neighbor_sampler, custom_cls)
    return _homogeneous(
        data,
        sampling,
        num_threads,
        neighbor_sampler,
        pin_memory,
        device,
        sample_device,
        feature_dtype,
    )


def _homogeneous(
    data,
    sampling,
    num_threads,
    sampler,
    pin_memory,
    device,
    sample_device=None,
    feature_dtype=None,
) -> GraphSource:
    graph, gather = graph_and_gather(data, pin_memory, device, feature_dtype)
    if sample_device is not None and device is not None and device.type == "cuda":
        gather.pin_tables()
    if sampler is not None:
        if getattr(sampler, "num_nodes", graph.num_nodes) != graph.num_nodes:
            raise ValueError(
                f"'neighbor_sampler' samples a graph of {sampler.num_nodes} nodes, 'data' has "
                f"{graph.num_nodes}"
            )
        return GraphSource(graph, sampler, gather)
    graph.validate()  # once per graph: the kernels do not check bounds
    attributes = sampling_attributes(data, graph, sampling.time_attr, sampling.weight_attr)
    sampler = homogeneous_sampler(graph, sampling, num_threads, attributes, sample_device)
    return GraphSource(graph, sampler, gather, "edge_time" in attributes)


def homogeneous_sampler(
    graph: Graph,
    sampling: SamplingConfig,
    num_threads: int,
    attributes: dict | None = None,
    sample_device: torch.device | None = None,
) -> BaseSampler:
    """The sampler of ``sampling.kind`` over ``graph`` (validated), with ``num_threads``
    Numba threads per call; node-wise ones with ``attributes`` (``weights``, ``node_time``
    or ``edge_time`` arrays in CSC order), none by default, on the GPU ``sample_device``
    (with torch's streams and memory) when given."""
    if sampling.kind == "labor":
        return LaborSampler(
            graph.indptr,
            graph.indices,
            sampling.fanouts(),
            validate=False,
            num_threads=num_threads,
            importance_sampling=sampling.importance_sampling,
            layer_dependency=sampling.layer_dependency,
        )
    return NeighborSampler(
        graph.indptr,
        graph.indices,
        sampling.fanouts(),
        replace=sampling.replace,
        validate=False,
        num_threads=num_threads,
        disjoint=sampling.disjoint,
        subgraph_type=sampling.subgraph_type,
        temporal_strategy=sampling.temporal_strategy,
        device=sample_device,
        # torch's streams and memory where torch drives the GPU (not in Numba's simulator)
        device_memory=TorchDeviceMemory() if torch.cuda.is_available() else None,
        **(attributes or {}),
    )


def graph_and_gather(
    data,
    pin_memory: bool,
    device: torch.device | None = None,
    feature_dtype: torch.dtype | None = None,
) -> tuple[Graph, GatherFeatures]:
    """The graph store and gathering stage of a ``Data``, a ``GraphDataset`` or a
    ``(FeatureStore, Graph)`` pair, for batches that go to ``device`` with their floating
    rows in ``feature_dtype`` (:class:`GatherFeatures`)."""
    if isinstance(data, GraphDataset):
        gather = GatherFeatures(
            data.feature_store(),
            pin_memory=pin_memory,
            device=device,
            feature_dtype=feature_dtype,
        )
        return data.graph, gather
    if isinstance(data, tuple) and len(data) == 2 and isinstance(data[1], Graph):
        store, graph = data
        if not isinstance(store, FeatureStore):
            raise TypeError(
                f"'data' as a pair must be (FeatureStore, Graph) (got {type(store).__name__} first)"
            )
        if store.keys() and store.num_nodes != graph.num_nodes:  # an empty store: no attributes
            raise ValueError(
                f"'data' as a pair must hold a row per node: the FeatureStore has "
                f"{store.num_nodes} rows, the Graph {graph.num_nodes} nodes"
            )
        gather = GatherFeatures(
            store,
            edge_ids=graph.edge_ids,
            pin_memory=pin_memory,
            device=device,
            feature_dtype=feature_dtype,
        )
        return graph, gather
    if not isinstance(data, Data):
        raise TypeError(
            f"'data' must be a PyG Data or HeteroData, a PyG (FeatureStore, GraphStore) pair, "
            f"a graphengine GraphDataset or a (FeatureStore, Graph) pair "
            f"(got {type(data).__name__})"
        )
    graph = Graph.from_data(data)
    return graph, GatherDataFeatures(data, graph, pin_memory, device, feature_dtype)


class GatherDataFeatures(GatherFeatures):
    """:class:`GatherFeatures` over a PyG ``Data``'s attributes, read again when they change
    after the loader is built: PyG's loaders read ``loader.data`` at every batch, and its
    examples delete ``x`` and ``y`` from an inference loader's data (or add ``n_id``) once
    the loader exists.

    Args:
        data: the ``Data`` (its ``edge_index`` is ``graph``'s).
        graph: its graph store (for the original edge ids).
        pin_memory, device, feature_dtype: as :class:`GatherFeatures`.
    """

    def __init__(self, data: Data, graph: Graph, pin_memory: bool, device=None, feature_dtype=None):
        super().__init__(
            None,
            edge_ids=graph.edge_ids,
            pin_memory=pin_memory,
            device=device,
            feature_dtype=feature_dtype,
        )
        self.data = data
        self._lock = threading.Lock()
        self._read_attributes()

    def __call__(self, out):
        if _attribute_version(self.data) != self._version:
            with self._lock:
                if _attribute_version(self.data) != self._version:
                    self._read_attributes()
        return super().__call__(out)

    def _read_attributes(self) -> None:
        """Sort the data's attributes into row tables, odd ones and others."""
        data = self.data
        check_attribute_rows(data)
        version = _attribute_version(data)
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
        self.nodes, self.edges = (
            FeatureStore(t) if t else None for t in (tables["node"], tables["edge"])
        )
        self.other_attrs, self.odd_attrs = other_attrs, odd_attrs
        if self.tables_pinned:
            self.pin_tables()
        self._version = version


def _attribute_version(data: Data) -> tuple:
    """What identifies a ``Data``'s attributes: their names and the objects they hold."""
    return tuple((key, id(value)) for key, value in data.items())


def _row_table(value) -> bool:
    """Whether ``value`` is a CPU table the extension gathers rows of (1-D, or 2-D rows
    contiguous)."""
    if isinstance(value, np.ndarray):
        value = as_tensor(value)
    if not isinstance(value, torch.Tensor) or value.is_cuda or value.dim() not in (1, 2):
        return False
    return value.dim() == 1 or value.shape[1] <= 1 or value.stride(1) == 1


def seed_nodes(input_nodes, num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Seed ids and their ``input_id`` (positions, or node ids for a boolean mask)."""
    if input_nodes is None:
        nodes = np.arange(num_nodes, dtype=np.int64)
        return nodes, nodes
    _refuse_node_types(input_nodes)
    return seed_ids(input_nodes, num_nodes)


def _refuse_node_types(input_nodes) -> None:
    """A node type or a ``(node type, ids)`` pair, given for homogeneous data, named as such
    rather than failing as ids."""
    if isinstance(input_nodes, str):
        raise ValueError(
            "'input_nodes' must be ids, a mask or None for homogeneous data; a node type is for "
            f"HeteroData (got {input_nodes!r})"
        )
    if (
        isinstance(input_nodes, (tuple, list))
        and len(input_nodes) == 2
        and (input_nodes[0] is None or isinstance(input_nodes[0], str))
    ):
        raise ValueError(
            "'input_nodes' must be ids, a mask or None for homogeneous data; a (node type, ids) "
            f"pair is for HeteroData (got {input_nodes!r})"
        )


def sampling_attributes(data, graph: Graph, time_attr: str | None, weight_attr: str | None) -> dict:
    """The :class:`samplers.NeighborSampler` arguments PyG's ``time_attr`` and ``weight_attr``
    name: ``node_time`` or ``edge_time`` and ``weights``, edge-level ones in CSC order."""
    if time_attr is None and weight_attr is None:
        return {}
    if not isinstance(data, Data):
        raise ValueError(
            "'time_attr' and 'weight_attr' name attributes of a PyG Data; give the data as a "
            f"Data (got {type(data).__name__})"
        )
    out = {}
    if time_attr is not None:
        if time_attr not in data:
            raise ValueError(f"'time_attr': the data has no attribute {time_attr!r}")
        if data.is_node_attr(time_attr):
            out["node_time"] = as_numpy(data[time_attr])
        elif data.is_edge_attr(time_attr):
            out["edge_time"] = in_csc_order(as_numpy(data[time_attr]), graph)
        else:
            raise ValueError(
                f"The time attribute {time_attr!r} is neither a node-level nor an edge-level "
                "attribute"
            )
    if weight_attr is not None:
        if weight_attr not in data or not data.is_edge_attr(weight_attr):
            raise ValueError(f"'weight_attr': the data has no edge attribute {weight_attr!r}")
        out["weights"] = in_csc_order(as_numpy(data[weight_attr]), graph)
    return out


def in_csc_order(values: np.ndarray, graph: Graph) -> np.ndarray:
    """An edge-level array ``[num_edges]`` in the original edge order, put in CSC order."""
    if values.ndim != 1 or values.shape[0] != graph.num_edges:
        raise ValueError(
            f"an edge-level sampling attribute must have shape ({graph.num_edges},) "
            f"(got {tuple(values.shape)})"
        )
    return values if graph.edge_ids is None else values[graph.edge_ids]


def _hetero_sampler(
    node_types, num_nodes, csc, edge_types, sampling: SamplingConfig, num_threads, attributes
) -> HeteroNeighborSampler:
    return HeteroNeighborSampler(
        node_types,
        num_nodes,
        csc,
        sampling.fanouts(edge_types),
        replace=sampling.replace,
        disjoint=sampling.disjoint,
        subgraph_type=sampling.subgraph_type,
        temporal_strategy=sampling.temporal_strategy,
        num_threads=num_threads,
        **attributes,
    )


def _refuse_labor(sampling: SamplingConfig, what: str) -> None:
    if sampling.kind == "labor":
        raise NotImplementedError(
            f"LABOR samples homogeneous graphs here; use NeighborLoader for {what}"
        )


def _heterogeneous(
    data: HeteroData, sampling, num_threads, sampler, feature_dtype=None
) -> GraphSource:
    _refuse_labor(sampling, "heterogeneous data")
    graph = HeteroGraph.from_data(data)
    gather = GatherHeteroFeatures(data, graph, feature_dtype)
    if sampler is not None:
        return GraphSource(graph, sampler, gather)
    attributes = hetero_sampling_attributes(data, graph, sampling.time_attr, sampling.weight_attr)
    sampler = _hetero_sampler(
        graph.node_types,
        graph.num_nodes,
        graph.csc,
        graph.edge_types,
        sampling,
        num_threads,
        attributes,
    )
    return GraphSource(graph, sampler, gather, "edge_time" in attributes)


def _remote(data, sampling: SamplingConfig, num_threads, sampler, custom_cls) -> GraphSource:
    if sampling.weight_attr is not None:
        raise NotImplementedError(
            "'weight_attr' is not supported for a (FeatureStore, GraphStore) pair (nor in "
            "PyG); load the graph into a Data or HeteroData to sample by weight"
        )
    remote = PyGRemoteGraph(*data)
    times = remote_times(remote, sampling.time_attr)
    gather = GatherRemoteFeatures(remote, custom_cls)
    if remote.is_hetero:
        _refuse_labor(sampling, "typed stores")
    if sampler is None and remote.is_hetero:
        csc = {t: (c.indptr, c.indices) for t, c in remote.csc_dict.items()}
        sampler = _hetero_sampler(
            remote.node_types,
            remote.num_nodes,
            csc,
            remote.edge_types,
            sampling,
            num_threads,
            times,
        )
    elif sampler is None:
        graph: Graph = remote.graph()
        graph.validate()
        attributes = {key: value[None] for key, value in times.items()}
        sampler = homogeneous_sampler(graph, sampling, num_threads, attributes)
    return GraphSource(remote, sampler, gather, "edge_time" in times)


def remote_times(remote: PyGRemoteGraph, time_attr: str | None) -> dict:
    """``node_time``/``edge_time`` for the sampler, per type, from the feature store's tables
    named ``time_attr``, as PyG reads them: tables of node types (string groups) are node
    times, of edge types (tuple groups) edge times (put in CSC order); on an untyped store
    PyG's rule applies: the name ``'time'`` means node times, any other edge times. Empty
    without ``time_attr``."""
    if time_attr is None:
        return {}
    attrs = [a for a in remote.feature_store.get_all_tensor_attrs() if a.attr_name == time_attr]
    if not attrs:
        raise ValueError(f"'time_attr': the feature store has no table named {time_attr!r}")
    node_time, edge_time = {}, {}
    for attr in attrs:
        attr = copy.copy(attr)
        attr.index = None  # the whole table
        values = as_numpy(remote.feature_store.get_tensor(attr)).reshape(-1)
        group = attr.group_name if remote.is_hetero else None
        on_edges = isinstance(group, tuple) if remote.is_hetero else time_attr != "time"
        if on_edges:
            perm = remote.csc(group).perm
            edge_time[group] = values if perm is None else values[perm]
        else:
            node_time[group] = values
    if node_time and edge_time:
        raise ValueError(
            f"The time attribute {time_attr!r} holds both node-level and edge-level information"
        )
    return {"node_time": node_time} if node_time else {"edge_time": edge_time}


def sample_nodes(source: GraphSource, input_nodes, input_time, input_id) -> SampleNodes:
    """The node loaders' sampling stage: PyG's ``input_nodes`` (ids, a mask, all nodes;
    heterogeneous: a node type or ``(node type, ids or mask or None)``), ``input_time`` and
    ``input_id`` resolved over ``source``'s graph."""
    if source.edge_times and input_time is None:
        raise ValueError(
            "'time_attr' holds edge times: pass each seed's time as 'input_time' (nodes have "
            "no time of their own)"
        )
    graph = source.graph
    input_type = None
    if source.is_hetero:
        if input_nodes is None:
            raise ValueError(
                "'input_nodes' of heterogeneous data must name the seeds' node type, e.g. "
                f"'{graph.node_types[0]}' or ('{graph.node_types[0]}', ids)"
            )
        input_type, nodes, ids = hetero_seed_nodes(input_nodes, graph)
    else:
        nodes, ids = seed_nodes(input_nodes, graph.num_nodes)
    if input_id is not None:
        ids = check_input_ids(input_id, nodes.shape[0])
    times = None
    if input_time is not None:
        times = check_times(as_numpy(input_time), nodes.shape[0], "input_time")
    return SampleNodes(source.sampler, nodes, ids, times, input_type)


def gather_through_pyg(
    data, source: GraphSource, input_type, custom_cls, transform_sampler_output: Callable
) -> Callable[[Any], Any]:
    """Gathering with PyG's ``transform_sampler_output``: our sampler's output as PyG's
    ``SamplerOutput`` / ``HeteroSamplerOutput``, the user's function on it, then PyG's own
    filtering (:class:`~graphengine.loader.pyg_interop.GatherPyGOutput`)."""
    if isinstance(source.graph, PyGRemoteGraph):
        raise NotImplementedError(
            "'transform_sampler_output' is not supported for a (FeatureStore, GraphStore) "
            "pair yet; apply it as 'transform' on the batches instead"
        )
    if isinstance(source.graph, HeteroGraph):
        permutation = {
            edge_type: None if perm is None else as_tensor(perm)
            for edge_type, perm in source.graph.edge_ids.items()
        }
    elif not isinstance(data, Data):
        raise ValueError(
            "'transform_sampler_output' hands PyG's SamplerOutput to PyG's filtering, "
            f"which needs a PyG Data (got {type(data).__name__})"
        )
    else:
        edge_ids = source.graph.edge_ids
        permutation = None if edge_ids is None else as_tensor(edge_ids)
    gather = GatherPyGOutput(data, permutation, input_type, custom_cls, transform_sampler_output)
    return _ThroughPyG(gather)


class _ThroughPyG:
    def __init__(self, gather: GatherPyGOutput):
        self.gather = gather

    def __call__(self, out):
        return self.gather(to_pyg_sampler_output(out))


def pyg_node_stages(
    data, sampler: PyGBaseSampler, input_nodes, input_time, input_id, custom_cls, transform
) -> tuple[SamplePyGNodes, GatherPyGOutput]:
    """Sampling and gathering with a user's PyG sampler, as PyG's ``NodeLoader`` runs it
    (``transform`` is PyG's ``transform_sampler_output``)."""
    sample = SamplePyGNodes.from_loader_args(sampler, data, input_nodes, input_time, input_id)
    gather = GatherPyGOutput(
        data,
        getattr(sampler, "edge_permutation", None),
        sample.input_type,
        custom_cls,
        transform,
    )
    return sample, gather


def is_pyg_sampler(sampler) -> bool:
    """A PyG ``torch_geometric.sampler.BaseSampler`` that is not one of graphengine's."""
    return isinstance(sampler, PyGBaseSampler) and not isinstance(sampler, BaseSampler)


def is_pyg_store_pair(data) -> bool:
    """A PyG ``(FeatureStore, GraphStore)`` pair that is not graphengine's own
    ``(FeatureStore, Graph)`` (which :func:`graph_and_gather` takes with its edge ids)."""
    return (
        isinstance(data, tuple)
        and len(data) == 2
        and isinstance(data[0], PyGFeatureStore)
        and isinstance(data[1], PyGGraphStore)
        and not isinstance(data[1], Graph)
    )
