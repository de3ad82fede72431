"""PyG's ``GATConv`` on a block, without its per-edge messages: PyG's results in fewer passes.

On a block, PyG's ``GATConv((x[:num_src], x[:num_dst]), edge_index)`` projects the
destinations a second time (they are the first sources), and its messages
``alpha * x_j`` are a ``[num_edges, heads, channels]`` tensor, made and scattered forward and
again backward: on a GraphSAGE-sized batch of synthetic-products, 0.5 GB per pass. Here the
destinations' projections are the first rows of the sources', and each head aggregates as a
weighted CSR product over the block's edges (with one self loop per destination, as PyG adds
them after removing the graph's own), its weights the attention coefficients, differentiated
by hand with respect to both. The attention logits and the softmax over each
destination's edges are PyG's own (``torch_geometric.utils.softmax``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch_geometric.nn import GATConv
from torch_geometric.utils import softmax

from graphengine.nn.fused_sage import weighted_sum

if TYPE_CHECKING:  # blocks.py runs these layers
    from graphengine.nn.blocks import Block


def fuses_gat(conv: torch.nn.Module) -> bool:
    """Whether ``conv`` is a PyG ``GATConv`` :func:`gat_block` computes: one weight for
    sources and destinations, no edge features, no residual, self loops added."""
    return (
        type(conv) is GATConv
        and getattr(conv, "lin", None) is not None
        and conv.edge_dim is None
        and getattr(conv, "res", None) is None
        and conv.add_self_loops
    )


class _LoopedEdges:
    """A block's edges into each destination, without its self loops (PyG removes them),
    followed by one self loop per destination: ``rowptr`` int64 ``[num_dst + 1]``,
    ``source`` and ``target`` int64 ``[num_looped]``; and the same edges grouped by source
    for the backward (``by_source``: positions, ``source_rowptr`` int64 ``[num_src + 1]``)."""

    def __init__(self, block: Block):
        source, target = block.edge_index
        kept = source != target
        if not bool(kept.all()):
            source, target = source[kept], target[kept]
        num_dst, num_src, num_edges = block.num_dst, block.num_src, source.numel()
        device = source.device
        counts = torch.bincount(target, minlength=num_dst)
        self.rowptr = torch.zeros(num_dst + 1, dtype=torch.int64, device=device)
        torch.cumsum(counts + 1, 0, out=self.rowptr[1:])
        rows = torch.arange(num_dst, device=device)
        total = num_edges + num_dst
        self.source = torch.empty(total, dtype=torch.int64, device=device)
        self.source[torch.arange(num_edges, device=device) + target] = source  # after loops
        self.source[self.rowptr[1:] - 1] = rows
        self.target = torch.repeat_interleave(rows, counts + 1, output_size=total)
        self.by_source = torch.argsort(self.source, stable=True)
        self.source_rowptr = torch.zeros(num_src + 1, dtype=torch.int64, device=device)
        torch.cumsum(torch.bincount(self.source, minlength=num_src), 0, out=self.source_rowptr[1:])
        self.num_src = num_src


class _EdgeWeightedSum(torch.autograd.Function):
    """``out[i] = sum over edges e into i of weight[e] * x[source[e]]``: ``weight`` float
    ``[num_looped]``, ``x`` ``[num_src, channels]`` to ``[num_dst, channels]``. Backward:
    ``x``'s gradient by the edges grouped by source, ``weight``'s as one dot product per edge
    (torch's own sparse backward merges repeated edges, so multigraphs would break it)."""

    @staticmethod
    def forward(ctx, weight, x, edges: _LoopedEdges):
        adjacency = torch.sparse_csr_tensor(
            edges.rowptr,
            edges.source,
            weight,
            size=(edges.rowptr.numel() - 1, edges.num_src),
            check_invariants=False,  # built from a checked block
        )
        ctx.edges = edges
        ctx.save_for_backward(weight, x)
        return weighted_sum(adjacency, x)

    @staticmethod
    def backward(ctx, grad):
        weight, x = ctx.saved_tensors
        edges = ctx.edges
        grad_weight = grad_x = None
        if ctx.needs_input_grad[0]:
            grad_weight = (grad[edges.target] * x[edges.source]).sum(-1)
        if ctx.needs_input_grad[1]:
            transposed = torch.sparse_csr_tensor(
                edges.source_rowptr,
                edges.target[edges.by_source],
                weight[edges.by_source],
                size=(edges.num_src, grad.shape[0]),
                check_invariants=False,
            )
            grad_x = weighted_sum(transposed, grad)
        return grad_weight, grad_x, None


def gat_block(conv: GATConv, x: torch.Tensor, block: Block) -> torch.Tensor:
    """PyG's ``conv((x[:num_src], x[:num_dst]), block.edge_index)``: ``x``
    ``[num_src, in_channels]`` to ``[num_dst, heads * out_channels]`` (concatenated heads) or
    ``[num_dst, out_channels]`` (averaged), for a ``conv`` that :func:`fuses_gat`.
    Differentiable by autograd."""
    heads, channels = conv.heads, conv.out_channels
    num_dst = block.num_dst
    h = conv.lin(x).view(-1, heads, channels)
    score_src = (h * conv.att_src).sum(-1)
    score_dst = (h[:num_dst] * conv.att_dst).sum(-1)
    edges = _LoopedEdges(block)
    logits = F.leaky_relu(score_src[edges.source] + score_dst[edges.target], conv.negative_slope)
    alpha = softmax(logits, edges.target, num_nodes=num_dst)
    alpha = F.dropout(alpha, p=conv.dropout, training=conv.training)
    alpha = alpha.to(h.dtype)  # under autocast, the scores' dtype may differ from h's
    per_head = [
        _EdgeWeightedSum.apply(alpha[:, head].contiguous(), h[:, head].contiguous(), edges)
        for head in range(heads)
    ]
    out = torch.stack(per_head, dim=1)
    out = out.flatten(1) if conv.concat else out.mean(dim=1)
    return out + conv.bias if conv.bias is not None else out
