"""PyG's ``GCNConv`` on blocks, with the degrees of the whole batch: PyG's results, DGL's cost.

Run on a sampled batch as PyG runs it (``model(x, edge_index)``), a GCN layer computes every
batch node from its in-edges in the batch and one self loop, each edge ``j -> i`` weighted
``1 / sqrt(deg(j) deg(i))`` with ``deg`` the batch in-degree plus one; every layer runs on
all nodes. Each layer's outputs for the nodes the next layer reads only need their own
in-edges, which that layer's block holds in full (:func:`~graphengine.batch.blocks.to_blocks`),
and the batch degrees, which the first block holds (the last hop's nodes have no in-edges in
the batch). So with those degrees given, each layer runs on its block only and gives PyG's
outputs for those nodes, as DGL's ``GraphConv`` on blocks runs (DGL normalizes by the
block's own degrees instead, another estimator). Linear first where that is cheaper, as
DGL's layer chooses (here by the products' sizes: a batch has far more sources than
destinations).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch.autograd.function import once_differentiable
from torch_geometric.nn import GCNConv

from graphengine.nn.aggregation import CsrAdjacency, input_gradient, value_dtype, weighted_sum
from graphengine.nn.dense import linear_layer

if TYPE_CHECKING:  # blocks.py runs these layers
    from graphengine.batch.blocks import Block


def fuses_gcn(conv: torch.nn.Module) -> bool:
    """Whether ``conv`` is a PyG ``GCNConv`` :func:`gcn_block` computes: normalized, with self
    loops of weight 1 (not ``improved``), not ``cached``, summing."""
    return (
        isinstance(conv, GCNConv)
        and conv.normalize
        and bool(conv.add_self_loops)
        and not conv.improved
        and not conv.cached
        and conv.aggr == "add"
    )


def batch_degree_scale(first: Block, num_nodes: int) -> torch.Tensor:
    """``deg ** -0.5`` for each of the batch's ``num_nodes`` nodes (float32
    ``[num_nodes]``): ``deg`` counts a node's in-edges in the batch that are not self loops,
    plus one (PyG's ``gcn_norm`` replaces self loops by one of weight 1). ``first`` is the
    first layer's block, which holds every in-edge of the batch."""
    source, target = first.edge_index
    degree = torch.ones(num_nodes, dtype=torch.float32, device=source.device)
    counts = first.rowptr[1:] - first.rowptr[:-1]
    loops = source == target
    if bool(loops.any()):
        counts = counts - torch.bincount(target[loops], minlength=first.num_dst)
    degree[: first.num_dst] += counts
    return degree.rsqrt_()


def gcn_block(
    conv: GCNConv, x: torch.Tensor, block: Block, scale: torch.Tensor, relu: bool = False
) -> torch.Tensor:
    """PyG's ``conv(x_batch, edge_index_batch)`` for the block's destinations (then ReLU
    when ``relu``, in the product's own autograd node where the layer aggregates first):
    ``x`` ``[num_src, in_channels]`` to ``[num_dst, out_channels]``, with ``scale`` from
    :func:`batch_degree_scale`. Differentiable by autograd."""
    source, target = block.edge_index
    dtype = value_dtype(x.dtype)
    weights = scale[source].to(dtype) * scale[target].to(dtype)
    weights = weights.masked_fill_(source == target, 0.0)
    adjacency = CsrAdjacency(block.rowptr, source, weights, block.num_src, False)
    self_weight = scale[: block.num_dst].to(x.dtype).square().unsqueeze(1)
    weight = conv.lin.weight
    in_channels, out_channels = weight.shape[1], weight.shape[0]
    num_edges = source.numel()
    linear_first = block.num_src * in_channels * out_channels + num_edges * out_channels
    aggregate_first = num_edges * in_channels + block.num_dst * in_channels * out_channels
    if linear_first < aggregate_first:
        h = linear_layer(x, weight)
        out = _SelfLoopSum.apply(h, adjacency, self_weight)
        out = out + conv.bias if conv.bias is not None else out
        return torch.relu(out) if relu else out
    aggregated = _SelfLoopSum.apply(x, adjacency, self_weight)
    return linear_layer(aggregated, weight, conv.bias, relu)


class _SelfLoopSum(torch.autograd.Function):
    """``adjacency @ x + self_weight * x[:num_rows]``: a GCN layer's sum over in-edges and
    its self loop, ``x`` ``[num_cols, width]`` and ``self_weight`` ``[num_rows, 1]`` (both
    of one dtype) to ``[num_rows, width]``. As ``torch.addcmul`` of a product and a slice,
    its backward would zero-fill a gradient of ``x``'s full size for the slice and add it to
    the product's (two passes over ``[num_cols, width]``); here the self loop's gradient is
    added in the transposed product's own pass (:func:`input_gradient`)."""

    @staticmethod
    def forward(ctx, x, adjacency: CsrAdjacency, self_weight):
        ctx.adjacency = adjacency
        ctx.save_for_backward(self_weight)
        out = weighted_sum(adjacency, x)
        return out.addcmul_(x[: adjacency.num_rows], self_weight)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        if not ctx.needs_input_grad[0]:
            return None, None, None
        (self_weight,) = ctx.saved_tensors
        grad_x, _ = input_gradient(ctx.adjacency, grad, grad * self_weight, column_sums=False)
        return grad_x, None, None
