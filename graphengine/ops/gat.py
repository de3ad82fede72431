"""GAT's fused attention over a block (``csrc/gat.cpp``, CPU kernels in
``csrc/cpu/gat_kernel.cpp``), forward and backward, and their fake kernels.

Shapes: ``h`` ``[num_src, heads, channels]`` (float32, bfloat16 or float16), ``att_src`` and
``att_dst`` float32 ``[heads, channels]``, ``rowptr`` int64 ``[num_dst + 1]``, ``col`` int64
``[num_edges]`` (each destination's sources; destination ``d`` is source ``d``). With
``self_loops`` the block's own self loops are replaced by one per destination, appended last,
so the coefficients are ``[slots, heads]`` with ``slots = num_edges + num_dst`` (else
``num_edges``). ``dropout``, optional, of the coefficients' shape, scales each after the
softmax.
"""

from __future__ import annotations

import torch

from graphengine.ops.build import fake_kernel


def gat_attention(
    h: torch.Tensor,
    att_src: torch.Tensor,
    att_dst: torch.Tensor,
    rowptr: torch.Tensor,
    col: torch.Tensor,
    negative_slope: float,
    self_loops: bool,
    dropout: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """PyG ``GATConv``'s attention: returns the float32 output ``[num_dst, heads, channels]``,
    the coefficients ``alpha`` ``[slots, heads]`` and the sources' and destinations' scores
    ``[num_src, heads]`` and ``[num_dst, heads]`` (what the backward needs)."""
    return torch.ops.graphengine.gat_attention(
        h, att_src, att_dst, rowptr, col, negative_slope, self_loops, dropout
    )


def gat_attention_backward(
    grad_out: torch.Tensor,
    h: torch.Tensor,
    att_src: torch.Tensor,
    att_dst: torch.Tensor,
    alpha: torch.Tensor,
    score_src: torch.Tensor,
    score_dst: torch.Tensor,
    rowptr: torch.Tensor,
    col: torch.Tensor,
    negative_slope: float,
    self_loops: bool,
    dropout: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The gradients of ``h``, ``att_src`` and ``att_dst`` (their shapes and dtypes) from the
    output's gradient ``grad_out`` ``[num_dst, heads, channels]`` and what
    :func:`gat_attention` returned; the attention vectors' sums do not depend on the thread
    count."""
    return torch.ops.graphengine.gat_attention_backward(
        grad_out,
        h,
        att_src,
        att_dst,
        alpha,
        score_src,
        score_dst,
        rowptr,
        col,
        negative_slope,
        self_loops,
        dropout,
    )


@fake_kernel("gat_attention")
def _fake_gat_attention(h, att_src, att_dst, rowptr, col, negative_slope, self_loops, dropout=None):
    num_src, heads, channels = h.shape
    num_dst = rowptr.shape[0] - 1
    slots = col.shape[0] + (num_dst if self_loops else 0)
    return (
        att_src.new_empty((num_dst, heads, channels)),
        att_src.new_empty((slots, heads)),
        att_src.new_empty((num_src, heads)),
        att_src.new_empty((num_dst, heads)),
    )


@fake_kernel("gat_attention_backward")
def _fake_gat_attention_backward(grad_out, h, att_src, att_dst, *rest):
    return torch.empty_like(h), torch.empty_like(att_src), torch.empty_like(att_dst)
