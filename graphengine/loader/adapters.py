"""What a loader accepts as ``data`` and ``input_nodes``, turned into stores and seed arrays."""

from __future__ import annotations

import numpy as np
import torch
from torch_geometric.data import Data

from graphengine.data.arrays import as_tensor
from graphengine.data.feature_store import FeatureStore
from graphengine.data.graph_store import Graph
from graphengine.datasets.dataset import GraphDataset
from graphengine.loader.stages import GatherFeatures
from samplers import check_node_ids


def graph_and_gather(
    data, pin_memory: bool, device: torch.device | None = None
) -> tuple[Graph, GatherFeatures]:
    """The graph store and gathering stage of a ``Data``, a ``GraphDataset`` or a
    ``(FeatureStore, Graph)`` pair, for batches that go to ``device``."""
    if isinstance(data, GraphDataset):
        gather = GatherFeatures(data.feature_store(), pin_memory=pin_memory, device=device)
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
            store, edge_ids=graph.edge_ids, pin_memory=pin_memory, device=device
        )
        return graph, gather
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
    gather = GatherFeatures(
        nodes, edges, other_attrs, graph.edge_ids, odd_attrs, pin_memory, device=device
    )
    return graph, gather


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


def as_numpy(value) -> np.ndarray:
    """A tensor (moved to the CPU), array or list as a NumPy array."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    return np.asarray(value)


def check_input_ids(input_id, num_seeds: int) -> np.ndarray:
    """PyG's ``input_id`` (one int per seed) as int64 ``[num_seeds]``."""
    ids = as_numpy(input_id)
    if ids.shape != (num_seeds,) or (ids.size and not np.issubdtype(ids.dtype, np.integer)):
        raise ValueError(
            f"'input_id' must hold one integer per seed, shape ({num_seeds},) "
            f"(got {ids.dtype} of shape {ids.shape})"
        )
    return ids.astype(np.int64)


def select_rows(value, dim: int, index: torch.Tensor):
    """``value`` indexed by ``index`` (int64) along ``dim``: tensors, arrays and lists; any
    other value as it is."""
    if isinstance(value, torch.Tensor):
        return value.index_select(dim, index.to(value.device))
    if isinstance(value, np.ndarray):
        return np.take(value, index.numpy(), axis=dim)
    if isinstance(value, list):
        return [value[i] for i in index.tolist()]
    return value
