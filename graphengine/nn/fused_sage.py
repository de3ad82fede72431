"""GraphSAGE's mean layer on a block as one autograd node: fewer passes over the activations.

PyG's ``SAGEConv`` on a block computes ``lin_l(mean(x_src)) + lin_r(x_dst)`` as separate
autograd nodes, and ``block_forward`` slices ``x_dst = x[:num_dst]``. On the CPU each of these
is a pass over a tensor of hundreds of MB: the sum of the two products, the zero-filled
gradient of the slice and its addition to the aggregation's gradient, torch's own zero-fill
and transposition in the sparse product's backward, a separate ReLU. Profiled here
(synthetic-products, GraphSAGE 3x256, fanouts 15,10,5, batch 1024), those passes took about
as long as the step's matrix products.

:class:`FusedSageMean` does the same math in fewer passes: one product for the neighbor and
root weights (no sum pass), on oneDNN's inner product where torch has it
(:mod:`graphengine.nn.dense`: faster than MKL's on this CPU, the bias added inside), the root
rows copied beside the mean by the aggregation kernel itself, the ReLU in one pass after the
product and its backward with the bias gradient in one pass (``csrc/cpu/relu_kernel.cpp``)
or, between two fused layers, in no pass of their own (:class:`ReluLink`: the next layer
applies the ReLU to the rows its aggregation reads and its backward in its input-gradient
pass), and a backward that adds the root term's input gradient into the first rows of the
aggregation's (no zero-filled slice gradient), the aggregation's transpose running as a
weighted CSR product over the block's edges grouped by source
(:mod:`graphengine.nn.aggregation`). The weights are the PyG layer's own, so the results are
those of PyG's ``SAGEConv`` (up to float rounding) and PyG's optimizers, checkpoints and DDP
see nothing different.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch.autograd.function import once_differentiable
from torch_geometric.nn import SAGEConv

from graphengine.nn.aggregation import (
    CsrAdjacency,
    IndexedRows,
    input_gradient,
    mean_adjacency,
    weighted_sum,
)
from graphengine.nn.dense import linear, relu_and_bias_backward, weight_gradient
from graphengine.ops.backend import uses_kernel

if TYPE_CHECKING:  # blocks.py runs these layers
    from graphengine.batch.blocks import Block


def fuses(conv: torch.nn.Module) -> bool:
    """Whether ``conv`` is a PyG ``SAGEConv`` that :func:`sage_mean` computes: mean
    aggregation, a root weight, no projection and no output normalization."""
    return (
        isinstance(conv, SAGEConv)
        and conv.aggr == "mean"
        and conv.root_weight
        and not conv.project
        and not conv.normalize
    )


@dataclass(eq=False)
class ReluLink:
    """A ReLU between two fused layers that the second layer computes, instead of the first
    in passes of its own: forward on the rows its aggregation reads (``csr_sum_into`` with
    ``relu``, ``csrc/cpu/csr_kernel.cpp``), backward in the pass that sums its input gradient
    (``input_gradient`` with the ReLU's input, which it keeps for that).

    The first layer returns its output before the ReLU. What lies between the two must
    commute with the ReLU: dropout does (it scales by nonnegative factors). Backward, the
    second layer leaves here the gradient it returns and that gradient's column sums; the
    first takes those sums as its bias gradient when the gradient reaching it is that very
    tensor (not, say, one scaled by a dropout's backward in between, whose column sums it
    computes itself)."""

    grad: torch.Tensor | None = None
    column_sum: torch.Tensor | None = None

    def leave(self, grad: torch.Tensor, column_sum: torch.Tensor) -> None:
        self.grad, self.column_sum = grad, column_sum

    def take_column_sum(self, grad: torch.Tensor) -> torch.Tensor:
        """``grad.sum(0)``: the sums left here if ``grad`` is the gradient left with them."""
        left, column_sum = self.grad, self.column_sum
        self.grad = self.column_sum = None
        same = (
            left is not None
            and grad.data_ptr() == left.data_ptr()
            and grad.shape == left.shape
            and grad.stride() == left.stride()
            and grad.dtype == left.dtype
        )
        return column_sum if same else grad.sum(0)


def sage_mean(
    conv: SAGEConv,
    x: torch.Tensor | IndexedRows,
    block: Block,
    relu: bool = False,
    input_relu: ReluLink | None = None,
    output_relu: ReluLink | None = None,
) -> torch.Tensor:
    """``conv((x[:num_src], x[:num_dst]), block)`` (then ReLU when ``relu``): ``x`` float
    ``[num_src, in_channels]`` to ``[num_dst, out_channels]``, for a ``conv`` that
    :func:`fuses`. Under ``torch.autocast`` it computes in the autocast dtype (``x`` and the
    weights cast to it; their gradients come back in their own dtypes), as autocast runs
    PyG's linear layers.

    ``input_relu``: ``x`` is the output of the previous fused layer before its ReLU (possibly
    through dropout), which this layer applies, forward and backward (see :class:`ReluLink`).
    ``output_relu`` (with ``relu``): this layer returns its output before the ReLU, which the
    one layer reading it applies, as its ``input_relu``. Give one link to both, on
    consecutive layers, or the results are wrong
    (:func:`~graphengine.nn.blocks.block_forward` does).

    ``x`` may be :class:`~graphengine.nn.aggregation.IndexedRows` (a first layer's features,
    not gathered): the aggregation reads its rows from the table on the CPU kernel when the
    table has the dtype computed in, else they are gathered first."""
    if isinstance(x, IndexedRows) and not (
        uses_kernel(x.table) and x.dtype == _compute_dtype(x.table.device.type, x.dtype)
    ):
        x = x.gather()
    if x.shape[0] != block.num_src:
        raise ValueError(
            f"'x' must have the block's {block.num_src} source rows (got {x.shape[0]})"
        )
    if output_relu is not None and not relu:
        raise ValueError("'output_relu' needs 'relu'")
    weights = (conv.lin_l.weight, conv.lin_l.bias, conv.lin_r.weight)
    links = (relu, input_relu, output_relu)
    device = weights[0].device.type
    if torch.is_autocast_enabled(device):
        dtype = torch.get_autocast_dtype(device)
        x = x if isinstance(x, IndexedRows) else x.to(dtype)
        weights = tuple(w.to(dtype) if w is not None else None for w in weights)
        with torch.autocast(device, enabled=False):
            return FusedSageMean.apply(x, *weights, mean_adjacency(block, dtype), *links)
    return FusedSageMean.apply(x, *weights, mean_adjacency(block, x.dtype), *links)


def _compute_dtype(device: str, dtype: torch.dtype) -> torch.dtype:
    """The dtype a layer computes in on ``device`` for inputs of ``dtype``: autocast's."""
    return torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else dtype


class FusedSageMean(torch.autograd.Function):
    """``relu?(mean(x_src) @ W_l^T + b + x_dst @ W_r^T)``: see the module docstring.

    The mean and ``x_dst`` sit side by side in one ``[num_dst, 2 * in_channels]`` table
    (the aggregation kernel writes both halves), so that each direction runs one product
    with both weights: ``[mean | x_dst] @ [W_l | W_r]^T`` forward, its weights' gradient
    ``grad^T @ [mean | x_dst]`` and its inputs' ``grad @ [W_l | W_r]`` backward: on the
    first layer's shapes one wider product runs faster than two narrower ones
    (docs/benchmarks-archive.md, issue 15).
    """

    @staticmethod
    def forward(
        ctx,
        x,
        weight_l,
        bias,
        weight_r,
        adjacency: CsrAdjacency,
        relu: bool,
        input_relu: ReluLink | None,
        output_relu: ReluLink | None,
    ):
        num_dst, channels = adjacency.num_rows, x.shape[1]
        both = weight_l.new_empty(num_dst, 2 * channels, dtype=x.dtype)
        weighted_sum(
            adjacency,
            x,
            out=both[:, :channels],
            root_out=both[:, channels:],
            relu=input_relu is not None,
        )
        weight = torch.cat([weight_l, weight_r], dim=1)
        ctx.masks_output_grad = relu and output_relu is None
        out = linear(both, weight, bias, ctx.masks_output_grad)
        ctx.adjacency = adjacency
        ctx.links = (input_relu, output_relu)
        ctx.has_bias = bias is not None
        ctx.save_for_backward(
            both,
            weight,
            out if ctx.masks_output_grad else None,
            x if input_relu is not None else None,
        )
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        both, weight, out, relu_input = ctx.saved_tensors
        channels = both.shape[1] // 2
        needs = ctx.needs_input_grad
        grad_x = grad_weight_l = grad_bias = grad_weight_r = None
        wants_bias = needs[2] and ctx.has_bias
        input_relu, output_relu = ctx.links
        if ctx.masks_output_grad:
            grad, grad_bias = relu_and_bias_backward(grad, out, wants_bias)
        elif wants_bias:
            grad_bias = grad.sum(0) if output_relu is None else output_relu.take_column_sum(grad)
        if needs[1] or needs[3]:
            grad_weight = weight_gradient(grad, both)
            grad_weight_l, grad_weight_r = grad_weight[:, :channels], grad_weight[:, channels:]
        if needs[0]:
            grad_both = linear(grad, weight.t(), None)
            grad_x, column_sum = input_gradient(
                ctx.adjacency,
                grad_both[:, :channels],
                grad_both[:, channels:],
                relu_input,
                column_sums=input_relu is not None,
            )
            if input_relu is not None:
                input_relu.leave(grad_x, column_sum)
        return grad_x, grad_weight_l, grad_bias, grad_weight_r, None, None, None, None
