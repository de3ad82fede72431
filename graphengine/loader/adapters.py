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
        store = FeatureStore({"x": data.x, "y": data.y})
        return data.graph, GatherFeatures(store, pin_memory=pin_memory, device=device)
    if isinstance(data, tuple) and len(data) == 2 and isinstance(data[1], Graph):
        store, graph = data
        if not isinstance(store, FeatureStore):
            raise TypeError(
                f"'data' as a pair must be (FeatureStore, Graph) (got {type(store).__name__} first)"
            )
        if store.num_nodes != graph.num_nodes:
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
