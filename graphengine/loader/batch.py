"""Turns a sampler's output into the PyG ``Data`` batch a model consumes."""

from __future__ import annotations

import warnings

import numpy as np
import torch
from torch_geometric.data import Data

from graphengine.ops import gather_rows
from samplers import SamplerOutput


def as_tensor(value) -> torch.Tensor:
    """A torch view of a tensor or numpy array (read-only memmaps included), without a copy."""
    if isinstance(value, torch.Tensor):
        return value
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*not writable.*")
        return torch.from_numpy(np.asarray(value))


def select(value: torch.Tensor, dim: int, index: torch.Tensor) -> torch.Tensor:
    """``value.index_select(dim, index)``; row gathers of CPU tables go through the extension."""
    if dim != 0 or value.is_cuda or value.dim() not in (1, 2):
        return value.index_select(dim, index)
    if value.dim() == 1:
        return gather_rows(value.view(-1, 1), index).view(-1)
    if value.shape[1] > 1 and value.stride(1) != 1:
        return value.index_select(0, index)
    return gather_rows(value, index)


class BatchBuilder:
    """Slices node attributes by ``n_id`` and edge attributes by ``e_id`` into a ``Data``.

    Args:
        node_attrs: name -> tensor (or numpy array) whose dimension ``dim`` is indexed by node.
        edge_attrs: name -> tensor (or numpy array) whose dimension ``dim`` is indexed by edge.
        other_attrs: name -> value copied into every batch unchanged.
        edge_ids: optional int64 ``[num_edges]``: the original edge id of each CSC position.
        dims: name -> the dimension to index (PyG's ``__cat_dim__``; 0 when absent).
    """

    def __init__(
        self,
        node_attrs: dict,
        edge_attrs: dict,
        other_attrs: dict,
        edge_ids: np.ndarray | None,
        dims: dict[str, int] | None = None,
    ):
        self.node_attrs = {k: as_tensor(v) for k, v in node_attrs.items()}
        self.edge_attrs = {k: as_tensor(v) for k, v in edge_attrs.items()}
        self.other_attrs = other_attrs
        self.edge_ids = None if edge_ids is None else as_tensor(edge_ids)
        self.dims = dims or {}

    def __call__(self, out: SamplerOutput) -> Data:
        n_id = torch.from_numpy(out.node)
        edge = torch.from_numpy(out.edge)
        e_id = edge if self.edge_ids is None else self.edge_ids[edge]
        data = Data(edge_index=torch.from_numpy(np.stack([out.row, out.col])))
        for key, value in self.node_attrs.items():
            data[key] = select(value, self.dims.get(key, 0), n_id)
        for key, value in self.edge_attrs.items():
            data[key] = select(value, self.dims.get(key, 0), e_id)
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
