"""What a :class:`~graphengine.loader.NeighborLoader` samples and gathers, for each kind of
``data`` PyG's loader takes: a ``Data`` (or graphengine's own dataset and stores), a
``HeteroData``, a PyG ``(FeatureStore, GraphStore)`` pair, or any of them with a user's PyG
sampler. Each gives a sampling stage, a gathering stage and the seeds."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch_geometric.data import Data, HeteroData
from torch_geometric.data import FeatureStore as PyGFeatureStore
from torch_geometric.data import GraphStore as PyGGraphStore
from torch_geometric.sampler import BaseSampler as PyGBaseSampler
from torch_geometric.sampler.base import NumNeighbors

from graphengine.data.graph_store import Graph
from graphengine.loader.adapters import (
    as_numpy,
    check_input_ids,
    graph_and_gather,
    sampling_attributes,
    seed_nodes,
)
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
from graphengine.loader.stages import SampleNodes
from samplers import (
    BaseSampler,
    HeteroNeighborSampler,
    LaborSampler,
    NeighborSampler,
    check_fanouts,
)
from samplers.neighbor import check_times


@dataclass
class LoaderParts:
    """A loader's sampling and gathering stages and its seeds.

    Attributes:
        sample: ``BatchRequest`` -> the sampler's output.
        gather: the sampler's output -> a ``Data`` or ``HeteroData`` batch.
        num_seeds: how many seeds the loader cuts into batches.
        sampler: the sampler in use (graphengine's or the user's PyG sampler).
        graph: the structure sampled (a ``Graph``, ``HeteroGraph`` or ``PyGRemoteGraph``), or
            ``None`` for a user's PyG sampler.
    """

    sample: Callable[[Any], Any]
    gather: Callable[[Any], Any]
    num_seeds: int
    sampler: Any
    graph: Any


@dataclass
class LoaderRequest:
    """The loader arguments that decide its parts (PyG's names and meanings)."""

    num_neighbors: Any
    input_nodes: Any
    input_time: Any
    input_id: Any
    time_attr: str | None
    weight_attr: str | None
    transform_sampler_output: Callable | None
    neighbor_sampler: Any
    custom_cls: type | None
    options: dict  # replace, num_threads, disjoint, subgraph_type, temporal_strategy
    pin_memory: bool
    device: torch.device | None
    labor: dict | None = None  # LaborSampler's options, for LABOR instead of node-wise sampling
    # Seeds are edges, which bring their own times (link loaders); the parts of a HeteroData
    # or of a store pair then come without a sampling stage.
    edge_seeds: bool = False


class GatherThroughPyG:
    """Gathering for PyG's ``transform_sampler_output``: our sampler's output as PyG's
    ``SamplerOutput``/``HeteroSamplerOutput``, the user's function on it, then PyG's own
    filtering (:class:`~graphengine.loader.pyg_interop.GatherPyGOutput`)."""

    def __init__(self, gather: GatherPyGOutput):
        self.gather = gather

    def __call__(self, out):
        return self.gather(to_pyg_sampler_output(out))


def loader_parts(data, request: LoaderRequest) -> LoaderParts:
    """The stages for ``data`` (see the module docstring)."""
    sampler = request.neighbor_sampler
    if isinstance(sampler, PyGBaseSampler) and not isinstance(sampler, BaseSampler):
        return _with_pyg_sampler(data, request)
    if sampler is not None and not isinstance(sampler, BaseSampler):
        raise TypeError(
            "'neighbor_sampler' must be a samplers.BaseSampler or a "
            f"torch_geometric.sampler.BaseSampler (got {type(sampler).__name__})"
        )
    if isinstance(data, HeteroData):
        return _heterogeneous(data, request)
    if is_pyg_store_pair(data):
        return _remote(data, request)
    return _homogeneous(data, request)


def _fanouts(request: LoaderRequest, edge_types=None):
    """``num_neighbors`` as a list or, for ``edge_types``, a dict; PyG's ``NumNeighbors``
    resolved by its own rules (its ``default`` for the edge types its dict lacks)."""
    num_neighbors = request.num_neighbors
    if not isinstance(num_neighbors, NumNeighbors):
        return num_neighbors
    return num_neighbors.values if edge_types is None else num_neighbors.get_values(edge_types)


def _check_seed_times(request: LoaderRequest, attributes: dict) -> None:
    """Sampling by edge time needs the seeds' times (nodes have none of their own): say so
    when the loader is built, not at its first batch."""
    if request.edge_seeds:
        return
    if attributes.get("edge_time") is not None and request.input_time is None:
        raise ValueError(
            f"'time_attr' {request.time_attr!r} holds edge times: pass each seed's time as "
            "'input_time'"
        )


def _seed_times(request: LoaderRequest, num_seeds: int) -> np.ndarray | None:
    if request.input_time is None:
        return None
    return check_times(as_numpy(request.input_time), num_seeds, "input_time")


def _through_pyg(request: LoaderRequest, data, permutation, input_type):
    return GatherThroughPyG(
        GatherPyGOutput(
            data, permutation, input_type, request.custom_cls, request.transform_sampler_output
        )
    )


def _homogeneous(data, request: LoaderRequest) -> LoaderParts:
    graph, gather = graph_and_gather(data, request.pin_memory, request.device)
    sampler = request.neighbor_sampler
    if sampler is None:
        graph.validate()  # once per graph: the kernels do not check bounds
        attributes = sampling_attributes(data, graph, request.time_attr, request.weight_attr)
        _check_seed_times(request, attributes)
        sampler = _homogeneous_sampler(graph, request, attributes)
    elif getattr(sampler, "num_nodes", graph.num_nodes) != graph.num_nodes:
        raise ValueError(
            f"'neighbor_sampler' samples a graph of {sampler.num_nodes} nodes, 'data' has "
            f"{graph.num_nodes}"
        )
    nodes, ids = seed_nodes(request.input_nodes, graph.num_nodes)
    if request.input_id is not None:
        ids = check_input_ids(request.input_id, nodes.shape[0])
    if request.transform_sampler_output is not None:
        if not isinstance(data, Data):
            raise ValueError(
                "'transform_sampler_output' hands PyG's SamplerOutput to PyG's filtering, "
                f"which needs a PyG Data (got {type(data).__name__})"
            )
        permutation = None if graph.edge_ids is None else torch.from_numpy(graph.edge_ids)
        gather = _through_pyg(request, data, permutation, None)
    sample = SampleNodes(sampler, nodes, ids, _seed_times(request, nodes.shape[0]))
    return LoaderParts(sample, gather, nodes.shape[0], sampler, graph)


def _homogeneous_sampler(graph: Graph, request: LoaderRequest, attributes: dict) -> BaseSampler:
    """graphengine's sampler over ``graph`` (validated): LABOR when the request asks for it,
    else node-wise neighbor sampling with ``attributes`` (weights, times)."""
    fanouts = check_fanouts(_fanouts(request), "num_neighbors")
    if request.labor is None:
        return NeighborSampler(
            graph.indptr, graph.indices, fanouts, validate=False, **request.options, **attributes
        )
    return LaborSampler(
        graph.indptr,
        graph.indices,
        fanouts,
        validate=False,
        num_threads=request.options["num_threads"],
        **request.labor,
    )


def _heterogeneous(data: HeteroData, request: LoaderRequest) -> LoaderParts:
    if request.labor is not None:
        raise NotImplementedError(
            "LABOR samples homogeneous graphs here; use NeighborLoader for heterogeneous data"
        )
    graph = HeteroGraph.from_data(data)
    sampler = request.neighbor_sampler
    if sampler is None:
        attributes = hetero_sampling_attributes(data, graph, request.time_attr, request.weight_attr)
        _check_seed_times(request, attributes)
        sampler = HeteroNeighborSampler(
            graph.node_types,
            graph.num_nodes,
            graph.csc,
            _fanouts(request, graph.edge_types),
            **request.options,
            **attributes,
        )
    gather = GatherHeteroFeatures(data, graph)
    if request.edge_seeds:  # a link loader cuts its seed edges and samples them itself
        return LoaderParts(None, gather, 0, sampler, graph)
    input_type, nodes, ids = _hetero_seeds(request, graph)
    if request.transform_sampler_output is not None:
        permutation = {
            edge_type: None if perm is None else torch.from_numpy(perm)
            for edge_type, perm in graph.edge_ids.items()
        }
        gather = _through_pyg(request, data, permutation, input_type)
    sample = SampleNodes(sampler, nodes, ids, _seed_times(request, nodes.shape[0]), input_type)
    return LoaderParts(sample, gather, nodes.shape[0], sampler, graph)


def _hetero_seeds(request: LoaderRequest, graph) -> tuple[str, np.ndarray, np.ndarray]:
    if request.input_nodes is None:
        raise ValueError(
            "'input_nodes' of heterogeneous data must name the seeds' node type, e.g. "
            f"'{graph.node_types[0]}' or ('{graph.node_types[0]}', ids)"
        )
    input_type, nodes, ids = hetero_seed_nodes(request.input_nodes, graph)
    if request.input_id is not None:
        ids = check_input_ids(request.input_id, nodes.shape[0])
    return input_type, nodes, ids


def _remote(data, request: LoaderRequest) -> LoaderParts:
    if request.weight_attr is not None:
        raise NotImplementedError(
            "'weight_attr' is not supported for a (FeatureStore, GraphStore) pair (nor in "
            "PyG); load the graph into a Data or HeteroData to sample by weight"
        )
    if request.transform_sampler_output is not None:
        raise NotImplementedError(
            "'transform_sampler_output' is not supported for a (FeatureStore, GraphStore) "
            "pair yet; apply it as 'transform' on the batches instead"
        )
    remote = PyGRemoteGraph(*data)
    sampler = request.neighbor_sampler
    times = remote_times(remote, request.time_attr)
    _check_seed_times(request, times)
    if remote.is_hetero and request.labor is not None:
        raise NotImplementedError(
            "LABOR samples homogeneous graphs here; use NeighborLoader for typed stores"
        )
    if sampler is None and remote.is_hetero:
        csc = {t: (c.indptr, c.indices) for t, c in remote.csc_dict.items()}
        sampler = HeteroNeighborSampler(
            remote.node_types,
            remote.num_nodes,
            csc,
            _fanouts(request, remote.edge_types),
            **request.options,
            **times,
        )
    elif sampler is None:
        graph: Graph = remote.graph()
        graph.validate()
        attributes = {key: value[None] for key, value in times.items()}
        sampler = _homogeneous_sampler(graph, request, attributes)
    gather = GatherRemoteFeatures(remote, request.custom_cls)
    if request.edge_seeds:  # a link loader cuts its seed edges and samples them itself
        return LoaderParts(None, gather, 0, sampler, remote)
    if remote.is_hetero:
        input_type, nodes, ids = _hetero_seeds(request, remote)
    else:
        input_type = None
        nodes, ids = seed_nodes(request.input_nodes, remote.num_nodes)
        if request.input_id is not None:
            ids = check_input_ids(request.input_id, nodes.shape[0])
    sample = SampleNodes(sampler, nodes, ids, _seed_times(request, nodes.shape[0]), input_type)
    return LoaderParts(sample, gather, nodes.shape[0], sampler, remote)


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


def _with_pyg_sampler(data, request: LoaderRequest) -> LoaderParts:
    sampler = request.neighbor_sampler
    sample = SamplePyGNodes.from_loader_args(
        sampler, data, request.input_nodes, request.input_time, request.input_id
    )
    gather = GatherPyGOutput(
        data,
        getattr(sampler, "edge_permutation", None),
        sample.input_type,
        request.custom_cls,
        request.transform_sampler_output,
    )
    return LoaderParts(sample, gather, int(sample.input_data.node.numel()), sampler, None)


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
