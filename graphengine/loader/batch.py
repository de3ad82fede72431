"""Turns a sampler's output into the PyG ``Data`` batch a model consumes."""

from __future__ import annotations

import numpy as np
import torch
from torch_geometric.data import Data

from graphengine.feature_store import FeatureStore, as_tensor
from samplers import SamplerOutput


class BatchBuilder:
    """Gathers node attributes by ``n_id`` and edge attributes by ``e_id`` into a ``Data``.

    Args:
        nodes: the node-level tables, gathered through the extension.
        edges: the edge-level tables (indexed by original edge id), or ``None``.
        other_attrs: name -> value copied into every batch unchanged.
        edge_ids: optional int64 ``[num_edges]``: the original edge id of each CSC position.
        odd_attrs: name -> (value, dim, "node" or "edge") for attributes indexed along a
            dimension other than 0, gathered with ``index_select``.
        pin_memory: gather the tables into pinned memory (needs CUDA), for fast copies.
    """

    def __init__(
        self,
        nodes: FeatureStore | None,
        edges: FeatureStore | None = None,
        other_attrs: dict | None = None,
        edge_ids: np.ndarray | None = None,
        odd_attrs: dict | None = None,
        pin_memory: bool = False,
    ):
        self.nodes = nodes
        self.edges = edges
        self.other_attrs = other_attrs or {}
        self.edge_ids = None if edge_ids is None else as_tensor(edge_ids)
        self.odd_attrs = odd_attrs or {}
        self.pin_memory = pin_memory

    def __call__(self, out: SamplerOutput) -> Data:
        n_id = torch.from_numpy(out.node)
        edge = torch.from_numpy(out.edge)
        e_id = edge if self.edge_ids is None else self.edge_ids[edge]
        data = Data(edge_index=torch.from_numpy(np.stack([out.row, out.col])))
        for store, index in ((self.nodes, n_id), (self.edges, e_id)):
            for key in store.keys() if store is not None else ():
                data[key] = store.gather(key, index, self._pinned(store[key], index))
        for key, (value, dim, level) in self.odd_attrs.items():
            data[key] = as_tensor(value).index_select(dim, n_id if level == "node" else e_id)
        for key, value in self.other_attrs.items():
            data[key] = value
        data.num_nodes = int(out.node.shape[0])
        data.n_id = n_id
        data.e_id = e_id
        data.input_id = torch.from_numpy(out.input_id)
        data.batch_size = out.batch_size
        data.num_sampled_nodes = list(out.num_sampled_nodes)
        data.num_sampled_edges = list(out.num_sampled_edges)
        return data

    def _pinned(self, table: torch.Tensor, index: torch.Tensor) -> torch.Tensor | None:
        """A pinned output buffer for ``table``'s rows at ``index`` (torch caches pinned
        allocations), or ``None`` to let the gather allocate."""
        if not self.pin_memory:
            return None
        shape = (index.shape[0], *table.shape[1:])
        return torch.empty(shape, dtype=table.dtype, pin_memory=True)
