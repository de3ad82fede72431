"""A first GNN layer split by input columns (P3's model-parallel first layer).

A layer that is linear in its input features until its bias, ``out = sum_c f_c(x[:, c]) + b``,
can be computed by workers that each hold a range of the columns: each applies its slice of
the weights to its columns and the partial results are summed. GraphSAGE with a mean or sum
aggregation (aggregate, then ``lin_l``; plus ``lin_r`` on the destinations), GCN (normalized
or plain sum, then ``lin``) and GIN (sum plus ``(1 + eps) x``, then its MLP's first linear)
are; their bias and everything after it run on the summed result (:func:`finish_of`).
Attention layers (GAT) are not: their scores need every column.

Each split layer aggregates first and applies its weight slice to the ``num_dst`` aggregated
rows, computing only the destinations the next layer reads.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch_geometric.nn import GCNConv, GINConv, SAGEConv
from torch_geometric.nn.conv.gcn_conv import gcn_norm
from torch_geometric.nn.dense.linear import Linear as PyGLinear
from torch_geometric.nn.models import MLP

from graphengine.batch.blocks import Block
from graphengine.nn.aggregation import mean_adjacency, sum_adjacency, weighted_sum

_LINEAR_AGGREGATIONS = {"mean": "mean", "sum": "sum", "add": "sum"}
_LINEARS = (torch.nn.Linear, PyGLinear)


class ColumnSplitError(ValueError):
    """A layer cannot be split by input columns."""


def aggregate(x: torch.Tensor, block: Block, reduce: str) -> torch.Tensor:
    """The ``reduce`` (``'sum'`` or ``'mean'``) of each destination's sources' rows of ``x``
    ``[>= num_src, F]`` over ``block``'s edges: ``[num_dst, F]`` (zeros without edges)."""
    x_src = x if x.shape[0] == block.num_src else x[: block.num_src]
    adjacency = (mean_adjacency if reduce == "mean" else sum_adjacency)(block, x.dtype)
    return weighted_sum(adjacency, x_src)


class SAGEColumns(torch.nn.Module):
    """GraphSAGE's ``lin_l(aggregate(x)) + lin_r(x_dst)`` without bias, on columns
    ``[start, stop)``: ``lin_l`` and ``lin_r`` hold ``[out, stop - start]`` weight slices."""

    def __init__(self, conv: SAGEConv, start: int, stop: int):
        super().__init__()
        reduce = _LINEAR_AGGREGATIONS.get(conv.aggr) if isinstance(conv.aggr, str) else None
        if reduce is None or conv.normalize or conv.project:
            raise ColumnSplitError(
                f"SAGEConv(aggr={conv.aggr!r}, normalize={conv.normalize}, "
                f"project={conv.project}) is not linear in its inputs: only mean or sum "
                "aggregations without normalize or project split by columns; train it with "
                "--parallel data"
            )
        self.reduce = reduce
        self.lin_l = torch.nn.Parameter(conv.lin_l.weight.detach()[:, start:stop].clone())
        self.lin_r = None
        if conv.root_weight:
            self.lin_r = torch.nn.Parameter(conv.lin_r.weight.detach()[:, start:stop].clone())
        self.weight_pairs = [(self.lin_l, conv.lin_l.weight)]
        if self.lin_r is not None:
            self.weight_pairs.append((self.lin_r, conv.lin_r.weight))

    def forward(self, x: torch.Tensor, block: Block) -> torch.Tensor:
        out = F.linear(aggregate(x, block, self.reduce), self.lin_l)
        if self.lin_r is not None:
            out = torch.addmm(out, x[: block.num_dst], self.lin_r.t())
        return out


class GCNColumns(torch.nn.Module):
    """GCN's ``lin`` of its (normalized) neighborhood sum without bias, on columns
    ``[start, stop)``; the normalization is PyG's ``gcn_norm`` of the block's edges."""

    def __init__(self, conv: GCNConv, start: int, stop: int):
        super().__init__()
        self.normalize = conv.normalize
        self.norm_args = (conv.improved, conv.add_self_loops, conv.flow)
        self.weight = torch.nn.Parameter(conv.lin.weight.detach()[:, start:stop].clone())
        self.weight_pairs = [(self.weight, conv.lin.weight)]

    def forward(self, x: torch.Tensor, block: Block) -> torch.Tensor:
        x_src = x if x.shape[0] == block.num_src else x[: block.num_src]
        if not self.normalize:
            return F.linear(aggregate(x_src, block, "sum"), self.weight)
        edge_index, weight = gcn_norm(
            block.edge_index, None, block.num_src, *self.norm_args, x.dtype
        )
        into_dst = edge_index[1] < block.num_dst
        adjacency = torch.sparse_coo_tensor(
            edge_index[:, into_dst].flip(0),
            weight[into_dst],
            (block.num_dst, block.num_src),
            check_invariants=False,  # gcn_norm's indices are in range
        )
        return F.linear(torch.sparse.mm(adjacency, x_src), self.weight)


class GINColumns(torch.nn.Module):
    """GIN's first linear of ``sum(x_src) + (1 + eps) x_dst`` without bias, on columns
    ``[start, stop)``."""

    def __init__(self, conv: GINConv, start: int, stop: int):
        super().__init__()
        if conv.eps.requires_grad:
            raise ColumnSplitError(
                "GINConv(train_eps=True) learns eps from every column; only a fixed eps splits "
                "(train it with --parallel data)"
            )
        first = _first_linear(conv.nn)
        self.eps = float(conv.eps)
        self.weight = torch.nn.Parameter(first.weight.detach()[:, start:stop].clone())
        self.weight_pairs = [(self.weight, first.weight)]

    def forward(self, x: torch.Tensor, block: Block) -> torch.Tensor:
        summed = aggregate(x, block, "sum") + (1 + self.eps) * x[: block.num_dst]
        return F.linear(summed, self.weight)


class AddBias(torch.nn.Module):
    """``x + bias`` (``bias`` shared with the layer it came from), or ``x`` without one."""

    def __init__(self, bias: torch.nn.Parameter | None):
        super().__init__()
        self.bias = bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x if self.bias is None else x + self.bias


def split_first_layer(conv: torch.nn.Module, start: int, stop: int) -> torch.nn.Module:
    """``conv``'s share for input columns ``[start, stop)``: a module called as
    ``(x [>= num_src, stop - start], block) -> [num_dst, out]`` whose partial results, summed
    over every worker's columns, give ``conv``'s output before its bias (:func:`finish_of`).

    Its parameters are copies of ``conv``'s weight columns; its ``weight_pairs`` lists each
    as ``(columns, conv's full weight)``. Raises :class:`ColumnSplitError` (a ``ValueError``)
    naming the layer when it is not linear in its inputs.
    """
    if isinstance(conv, SAGEConv):
        return SAGEColumns(conv, start, stop)
    if isinstance(conv, GCNConv):
        return GCNColumns(conv, start, stop)
    if isinstance(conv, GINConv):
        return GINColumns(conv, start, stop)
    raise ColumnSplitError(
        f"a first layer {type(conv).__name__} cannot be split by feature columns (its output "
        "is not a sum of per-column terms; attention scores need every column): train it "
        "with --parallel data (only SAGEConv, GCNConv and GINConv first layers split)"
    )


def finish_of(conv: torch.nn.Module) -> torch.nn.Module:
    """What ``conv`` applies after the summed partial results: its bias (GraphSAGE, GCN), or
    its MLP after the first linear, that linear's bias included (GIN). Shares ``conv``'s
    parameters."""
    if isinstance(conv, SAGEConv):
        return AddBias(conv.lin_l.bias)
    if isinstance(conv, GCNConv):
        return AddBias(conv.bias)
    if isinstance(conv, GINConv):
        return _after_first_linear(conv.nn)
    raise ColumnSplitError(f"no split for a first layer {type(conv).__name__}")


def _first_linear(nn: torch.nn.Module) -> torch.nn.Module:
    if isinstance(nn, MLP):
        return nn.lins[0]
    if isinstance(nn, torch.nn.Sequential) and len(nn) and isinstance(nn[0], _LINEARS):
        return nn[0]
    raise ColumnSplitError(
        f"GINConv's nn must be a PyG MLP or a Sequential starting with a linear layer to split "
        f"by columns (got {type(nn).__name__}); train it with --parallel data"
    )


def _after_first_linear(nn: torch.nn.Module) -> torch.nn.Module:
    """``nn`` with its first linear replaced by that linear's bias alone (sharing the rest)."""
    first = _first_linear(nn)
    if isinstance(nn, torch.nn.Sequential):
        return torch.nn.Sequential(AddBias(first.bias), *list(nn)[1:])
    tail = copy.copy(nn)
    tail._modules = dict(nn._modules)
    tail._parameters = dict(nn._parameters)
    tail._buffers = dict(nn._buffers)
    tail.lins = torch.nn.ModuleList([AddBias(first.bias), *list(nn.lins)[1:]])
    return tail
