"""PyG's ``GATConv`` on a block without its per-edge messages: PyG's results in fewer passes.

On a block, PyG's ``GATConv((x[:num_src], x[:num_dst]), edge_index)`` projects the
destinations a second time (they are the first sources) and makes its messages
``alpha * x_j`` as a ``[num_edges, heads, channels]`` tensor, forward and again backward: on a
batch of synthetic-products (fanouts 15,10,5, 4 heads of 64 channels), about 1 GB per pass,
gathered, multiplied and scattered. Here the destinations' projections are the first rows of
the sources', and the extension's ``gat_attention`` kernel (``csrc/cpu/gat_kernel.cpp``)
computes each destination's logits, softmax and weighted sum of its sources' rows in one pass
(its backward: one pass per destination for the attention's gradient, one per source for the
rows'), keeping only the ``[num_edges, heads]`` coefficients. The math is PyG's: leaky ReLU of
``<att_src, h_j> + <att_dst, h_i>``, a softmax over each destination's edges (PyG's ``1e-16``
in the sum), the block's own self loops replaced by one per destination, attention dropout
(its own draws), heads concatenated or averaged, residual and bias.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch.nn.parameter import UninitializedParameter
from torch_geometric.nn import GATConv
from torch_geometric.nn.dense.linear import Linear as PygLinear

from graphengine.nn.dense import linear_layer
from graphengine.ops import gat
from graphengine.ops.backend import extension_usable, require_extension

if TYPE_CHECKING:  # blocks.py runs these layers
    from graphengine.batch.blocks import Block


def fuses_gat(conv: torch.nn.Module, x: torch.Tensor) -> bool:
    """Whether :func:`gat_block` computes ``conv`` on ``x``: a float32 PyG ``GATConv`` (autocast
    allowed) with one projection for sources and destinations and no edge features, ``x`` on
    the CPU in float32 (or in the autocast dtype under autocast), and
    :func:`graphengine.ops.backend.extension_usable`."""
    in_autocast = torch.is_autocast_enabled("cpu") and x.dtype == torch.get_autocast_dtype("cpu")
    return (
        type(conv) is GATConv
        and conv.lin is not None
        and (x.dtype == torch.float32 or in_autocast)
        and conv.att_src.dtype == torch.float32
        and conv.edge_dim is None
        and x.device.type == "cpu"
        and extension_usable()
    )


def gat_block(conv: GATConv, x: torch.Tensor, block: Block) -> torch.Tensor:
    """PyG's ``conv((x[:num_src], x[:num_dst]), block.edge_index)`` for a ``conv`` that
    :func:`fuses_gat`: ``x`` ``[num_src, in_channels]`` to float ``[num_dst, heads *
    out_channels]`` (heads concatenated) or ``[num_dst, out_channels]`` (averaged).
    Differentiable by autograd; under ``torch.autocast`` the projection runs in its dtype, the
    attention in float32, as PyG's layer runs then."""
    if x.shape[0] != block.num_src:
        raise ValueError(
            f"'x' must have the block's {block.num_src} source rows (got {x.shape[0]})"
        )
    require_extension("gat_block")
    heads, channels, num_dst = conv.heads, conv.out_channels, block.num_dst
    h = _project(conv.lin, x).view(-1, heads, channels)
    dropout = None
    if conv.training and conv.dropout > 0:
        slots = block.edge_index.shape[1] + (num_dst if conv.add_self_loops else 0)
        kept = torch.ones(slots, heads, dtype=torch.float32, device=x.device)
        dropout = F.dropout(kept, conv.dropout)
    out = _Attention.apply(
        h.contiguous(),
        conv.att_src.view(heads, channels).float(),
        conv.att_dst.view(heads, channels).float(),
        block,
        float(conv.negative_slope),
        bool(conv.add_self_loops),
        dropout,
    )
    out = out.view(num_dst, heads * channels) if conv.concat else out.mean(dim=1)
    if conv.res is not None:
        out = out + conv.res(x[:num_dst])
    if conv.bias is not None:
        out = out + conv.bias
    return out


def _project(lin: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """``lin(x)`` for PyG's ``Linear`` (``F.linear`` of its weight and bias), on oneDNN's
    product where :func:`~graphengine.nn.dense.linear_layer` uses it; other modules, and a
    lazy ``Linear`` not yet initialized and one with hooks, run as they are."""
    plain = not (lin._forward_hooks or lin._forward_pre_hooks)
    if type(lin) is PygLinear and plain and not isinstance(lin.weight, UninitializedParameter):
        return linear_layer(x, lin.weight, lin.bias)
    return lin(x)


class _Attention(torch.autograd.Function):
    """``out[i, k] = sum over edges j -> i of alpha[e, k] * dropout[e, k] * h[j, k]``, with
    ``alpha`` the softmax over ``i``'s edges of ``leaky_relu(<h[j, k], att_src[k]> + <h[i, k],
    att_dst[k]>)``: ``h`` ``[num_src, heads, channels]``, ``att_src`` and ``att_dst`` float
    ``[heads, channels]`` to float ``[num_dst, heads, channels]``."""

    @staticmethod
    def forward(ctx, h, att_src, att_dst, block: Block, slope, self_loops, dropout):
        graph = (block.rowptr, block.edge_index[0], slope, self_loops, dropout)
        out, alpha, score_src, score_dst = gat.gat_attention(h, att_src, att_dst, *graph)
        ctx.graph = graph
        ctx.save_for_backward(h, att_src, att_dst, alpha, score_src, score_dst)
        return out

    @staticmethod
    def backward(ctx, grad):
        grad_h, grad_att_src, grad_att_dst = gat.gat_attention_backward(
            grad, *ctx.saved_tensors, *ctx.graph
        )
        return grad_h, grad_att_src, grad_att_dst, None, None, None, None
