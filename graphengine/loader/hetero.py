"""Heterogeneous graphs in the NeighborLoader: a PyG ``HeteroData`` as per-edge-type CSC arrays
for :class:`samplers.HeteroNeighborSampler`, and its batches as ``HeteroData`` again."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch_geometric.data import HeteroData

from graphengine.data.feature_dtype import as_batch_dtype, check_batch_feature_dtype
from graphengine.data.graph_store import coo_to_csc
from graphengine.loader.adapters import as_numpy, check_attribute_rows, seed_ids, select_rows
from samplers import HeteroSamplerOutput, as_edge_index, check_node_ids

EdgeType = tuple[str, str, str]


@dataclass
class HeteroGraph:
    """The structure of a ``HeteroData``, per edge type in CSC form.

    Attributes:
        node_types: the node types, in the data's order.
        edge_types: the ``(src, relation, dst)`` edge types, in the data's order.
        num_nodes: nodes per node type.
        csc: per edge type, ``(indptr, indices)``: int64 ``[num_nodes[dst] + 1]`` and int32 or
            int64 ``[num_edges]`` source ids.
        edge_ids: per edge type, the original edge id of each CSC position (int64), or
            ``None`` where the edges already ascend by destination.
    """

    node_types: list[str]
    edge_types: list[EdgeType]
    num_nodes: dict[str, int]
    csc: dict[EdgeType, tuple[np.ndarray, np.ndarray]]
    edge_ids: dict[EdgeType, np.ndarray | None]

    @classmethod
    def from_data(cls, data: HeteroData) -> HeteroGraph:
        """Build from a ``HeteroData``: every edge type needs an ``edge_index``; ids are checked
        against the node counts of its source and destination types."""
        node_types, edge_types = data.metadata()
        num_nodes = {}
        for node_type in node_types:
            count = data[node_type].num_nodes
            if count is None:
                raise ValueError(f"node type {node_type!r} has no nodes count or node attributes")
            num_nodes[node_type] = int(count)
        csc, edge_ids = {}, {}
        for edge_type in edge_types:
            src, _, dst = edge_type
            edge_index = data[edge_type].get("edge_index")
            if edge_index is None:
                raise ValueError(f"edge type {edge_type} has no 'edge_index'")
            edge_index = as_numpy(edge_index)
            if edge_index.ndim != 2 or edge_index.shape[0] != 2:
                raise ValueError(
                    f"'edge_index' of {edge_type} must have shape [2, num_edges] "
                    f"(got {edge_index.shape})"
                )
            row = check_node_ids(edge_index[0], num_nodes[src], f"edge_index of {edge_type}, row")
            col = check_node_ids(edge_index[1], num_nodes[dst], f"edge_index of {edge_type}, col")
            indptr, indices, perm = coo_to_csc(row, col, num_nodes[src], num_nodes[dst])
            csc[edge_type] = (indptr, indices)
            edge_ids[edge_type] = perm
        return cls(list(node_types), list(edge_types), num_nodes, csc, edge_ids)

    def in_csc_order(self, edge_type: EdgeType, values) -> np.ndarray:
        """An edge-level array of ``edge_type`` (original order) in its CSC order."""
        values = as_numpy(values)
        num_edges = self.csc[edge_type][1].shape[0]
        if values.ndim != 1 or values.shape[0] != num_edges:
            raise ValueError(
                f"an edge-level sampling attribute of {edge_type} must have shape "
                f"({num_edges},) (got {tuple(values.shape)})"
            )
        perm = self.edge_ids[edge_type]
        return values if perm is None else values[perm]


def hetero_sampling_attributes(
    data: HeteroData, graph: HeteroGraph, time_attr: str | None, weight_attr: str | None
) -> dict:
    """:class:`samplers.HeteroNeighborSampler`'s ``node_time``/``edge_time`` and ``weights``
    from PyG's ``time_attr`` and ``weight_attr`` (edge-level ones in CSC order). As in PyG, a
    time attribute lives on node types or on edge types, not both."""
    out = {}
    if time_attr is not None:
        on_nodes = {
            t: as_numpy(data[t][time_attr]) for t in graph.node_types if time_attr in data[t]
        }
        on_edges = {
            t: graph.in_csc_order(t, data[t][time_attr])
            for t in graph.edge_types
            if time_attr in data[t]
        }
        if on_nodes and on_edges:
            raise ValueError(
                f"The time attribute {time_attr!r} holds both node-level and edge-level information"
            )
        if not on_nodes and not on_edges:
            raise ValueError(
                f"The time attribute {time_attr!r} is neither a node-level nor an edge-level "
                "attribute"
            )
        out["node_time" if on_nodes else "edge_time"] = on_nodes or on_edges
    if weight_attr is not None:
        weights = {
            t: graph.in_csc_order(t, data[t][weight_attr])
            for t in graph.edge_types
            if weight_attr in data[t]
        }
        if not weights:
            raise ValueError(f"'weight_attr': no edge type has an attribute {weight_attr!r}")
        out["weights"] = weights
    return out


def hetero_seed_nodes(input_nodes, graph: HeteroGraph) -> tuple[str, np.ndarray, np.ndarray]:
    """PyG's heterogeneous ``input_nodes`` (a node type, or ``(node type, ids, mask or None)``)
    as ``(input type, seed ids, input ids)``: int64 arrays; a mask's input ids are node ids,
    as PyG gives them, else positions."""
    if isinstance(input_nodes, str):
        node_type, nodes = input_nodes, None
    elif isinstance(input_nodes, (tuple, list)) and len(input_nodes) == 2:
        node_type, nodes = input_nodes
    else:
        raise ValueError(
            "'input_nodes' of a HeteroData must be a node type or a (node type, ids or mask) "
            f"pair (got {type(input_nodes).__name__})"
        )
    if not isinstance(node_type, str):
        raise TypeError(f"'input_nodes' node type must be a str (got {node_type!r})")
    if node_type not in graph.num_nodes:
        raise ValueError(
            f"'input_nodes' names node type {node_type!r}; the data has {graph.node_types}"
        )
    count = graph.num_nodes[node_type]
    if nodes is None:
        ids = np.arange(count, dtype=np.int64)
        return node_type, ids, ids
    return (node_type, *seed_ids(nodes, count, node_type))


class GatherHeteroFeatures:
    """Gathering for heterogeneous batches: a :class:`samplers.HeteroSamplerOutput` -> a
    ``HeteroData`` as PyG's ``NeighborLoader`` gives it: every node attribute of a type sliced
    by that type's ``n_id``, every edge attribute by ``e_id`` (edge types whose edges lost
    their ids, in bidirectional subgraphs, drop their edge attributes, as in PyG), graph- and
    type-level attributes kept, and ``n_id``, ``e_id``, ``batch``, ``num_sampled_nodes``,
    ``num_sampled_edges`` per type, ``input_id``, ``seed_time`` and ``batch_size`` on the
    seeds' type.

    Args:
        data: the ``HeteroData`` batches are cut from.
        graph: its :class:`HeteroGraph` (for the edges' original ids).
        feature_dtype: the dtype the node and edge attributes' floating rows are handed
            over in; ``None`` hands float16 rows over as float32
            (:func:`graphengine.data.feature_dtype.as_batch_dtype`).

    Raises:
        ValueError: a node or edge type's attribute of the wrong row count
            (:func:`graphengine.loader.adapters.check_attribute_rows`).
    """

    def __init__(
        self, data: HeteroData, graph: HeteroGraph, feature_dtype: torch.dtype | None = None
    ):
        check_attribute_rows(data)
        self.data = data
        self.graph = graph
        self.feature_dtype = check_batch_feature_dtype(feature_dtype)

    def __call__(self, out: HeteroSamplerOutput) -> HeteroData:
        batch = HeteroData()
        for key, value in self.data._global_store.items():
            batch[key] = value
        for node_type in self.graph.node_types:
            store = self.data[node_type]
            n_id = torch.from_numpy(out.node[node_type])
            target = batch[node_type]
            for key, value in store.items():
                if key == "num_nodes":
                    target.num_nodes = n_id.numel()
                elif store.is_node_attr(key):
                    dim = self.data.__cat_dim__(key, value, store)
                    target[key] = self._rows(select_rows(value, dim, n_id))
                else:  # a type-level attribute, kept as PyG keeps it
                    target[key] = value
            target.n_id = n_id
        for edge_type in self.graph.edge_types:
            store = self.data[edge_type]
            target = batch[edge_type]
            target.edge_index = torch.from_numpy(
                as_edge_index(out.row[edge_type], out.col[edge_type])
            )
            edge = None if out.edge is None else out.edge.get(edge_type)
            e_id = None
            if edge is not None:
                perm = self.graph.edge_ids[edge_type]
                e_id = torch.from_numpy(edge if perm is None else perm[edge])
                target.e_id = e_id
            for key, value in store.items():
                if key == "edge_index":
                    continue
                if not store.is_edge_attr(key):  # a type-level attribute, kept
                    target[key] = value
                elif e_id is not None:
                    dim = self.data.__cat_dim__(key, value, store)
                    target[key] = self._rows(select_rows(value, dim, e_id))
        for name, values in (("batch", out.batch), ("num_sampled_nodes", out.num_sampled_nodes)):
            for node_type, value in (values or {}).items():
                batch[node_type][name] = (
                    torch.from_numpy(value) if isinstance(value, np.ndarray) else list(value)
                )
        for edge_type, value in (out.num_sampled_edges or {}).items():
            batch[edge_type].num_sampled_edges = list(value)
        seeds = batch[out.input_type]
        seeds.input_id = torch.from_numpy(out.input_id)
        if out.seed_time is not None:
            seeds.seed_time = torch.from_numpy(out.seed_time)
        seeds.batch_size = out.batch_size
        return batch

    def _rows(self, rows):
        """Selected ``rows`` in the batch's feature dtype (tensors; other values as they
        are)."""
        if isinstance(rows, torch.Tensor):
            return as_batch_dtype(rows, self.feature_dtype)
        return rows
