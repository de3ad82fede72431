"""The fused layers' dense products, through oneDNN's inner product on the CPU.

torch runs a float32 ``x @ w.t()`` on the CPU through MKL's sgemm, and its bfloat16 one
through oneDNN's matmul. torch also ships oneDNN's inner product, as the op its compiler
lowers linear layers to (``torch.ops.mkldnn._linear_pointwise``). On the CPUs this was tuned on
(AVX-512) that op runs a GraphSAGE step's float32 products faster than MKL, and it adds the
bias inside the product, where MKL's ``addmm`` first copies the bias into every output row. In
bfloat16 it is as fast as torch's product without a bias and adds the bias too; it runs where
oneDNN has bfloat16 kernels for this CPU. The measurements are in docs/benchmarks-archive.md
(issue 15). Its fused ReLU is not used: it turns NaN into 0, where torch's ReLU keeps NaN, and
that would hide a diverged model.

The weights' gradient ``grad.t() @ x`` is a product over the batch's rows. oneDNN's inner
product runs it as ``x.t() @ grad``, with ``x.t()``'s rows contiguous and ``grad.t()`` as the
weights, strided. So :func:`weight_gradient` transposes ``x`` a block of rows at a time into
a buffer that stays in the cache (the extension's ``transpose_into``) and adds the blocks'
products, in float32 and for at least :data:`BLOCKED_FROM_ROWS` rows, where that beats
``mm``. A bfloat16 product would round each block's sum to bfloat16, so it stays on ``mm``,
as do fewer rows, where the transposes cost more than the product gains.

The op is private to torch, so it is used where it was checked once in this process
against a float64 product (a small problem with a strided input, and one with strided
weights, within float32 and bfloat16 rounding), and only on float32 or bfloat16 CPU tensors
with torch's oneDNN enabled (``torch.backends.mkldnn``) and where
:func:`graphengine.ops.backend.kernels_allowed`: the ``"torch"`` ops backend
(:func:`graphengine.ops.set_backend`, ``GRAPHENGINE_OPS_BACKEND=torch``) computes with
torch's own ops everywhere, this product included.
"""

from __future__ import annotations

import functools
import logging

import torch
from torch.autograd.function import once_differentiable

from graphengine.ops import relu as relu_ops
from graphengine.ops.backend import kernels_allowed, uses_kernel
from graphengine.ops.transpose import transpose_into

logger = logging.getLogger(__name__)


def linear(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    relu: bool = False,
) -> torch.Tensor:
    """``x @ weight.t() + bias``, then ReLU when ``relu`` (NaN stays NaN, as torch's ReLU
    keeps it): ``x`` float ``[rows, in]``, ``weight`` ``[out, in]`` and ``bias`` ``[out]``
    (or ``None``) in ``x``'s dtype, to ``[rows, out]``. Not differentiable (the fused layers
    call it in their own autograd functions).

    With a ReLU and without oneDNN, the product runs without the bias and the extension's
    ``bias_relu_`` adds it in the ReLU's pass (``addmm`` would first copy the bias into every
    output row)."""
    bias_with_relu = None  # the bias, when bias_relu_ adds it in the ReLU's pass
    if uses_onednn(x):
        out = torch.ops.mkldnn._linear_pointwise(x, weight.contiguous(), bias, "none", [], "")
    elif relu and bias is not None and uses_kernel(x):
        out, bias_with_relu = x @ weight.t(), bias
    else:
        out = torch.addmm(bias, x, weight.t()) if bias is not None else x @ weight.t()
    if not relu:
        return out
    if uses_kernel(out):
        relu_ops.bias_relu_(out, bias_with_relu)
        return out
    return out.relu_()


def linear_layer(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, relu: bool = False
) -> torch.Tensor:
    """``torch.nn.functional.linear(x, weight, bias)``, then ReLU when ``relu``,
    differentiable, with the forward and input-gradient products on oneDNN where
    :func:`uses_onednn` (the weights' gradient as :func:`weight_gradient` runs it), the ReLU
    in one pass after the product and its backward with the bias gradient in one pass (the
    extension's ``bias_relu_`` and ``relu_backward_sum``): ``x`` ``[rows, in]``, ``weight``
    ``[out, in]``, ``bias`` ``[out]`` or ``None``, to ``[rows, out]``. Under ``torch.autocast``, and
    wherever oneDNN is not used, it is torch's own ``linear`` and ``relu``, so autocast casts
    as it does for PyG's layers. Not twice differentiable."""
    if uses_onednn(x) and weight.dtype == x.dtype and not torch.is_autocast_enabled("cpu"):
        return _OneDnnLinear.apply(x, weight, bias, relu)
    out = torch.nn.functional.linear(x, weight, bias)
    return torch.relu(out) if relu else out


def relu_and_bias_backward(
    grad: torch.Tensor, relu_out: torch.Tensor, wants_bias: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """ReLU's backward and the gradient of a bias added before it: ``grad`` zeroed where
    ``relu_out <= 0`` (NaN keeps its gradient, as torch's ``threshold_backward``), both
    ``[rows, channels]``, and its column sums ``[channels]`` when ``wants_bias`` (else
    ``None``); in one pass on the extension's CPU kernel."""
    if wants_bias and uses_kernel(grad):
        return relu_ops.relu_backward_sum(grad.contiguous(), relu_out)
    grad = torch.ops.aten.threshold_backward(grad, relu_out, 0)
    return grad, grad.sum(0) if wants_bias else None


class _OneDnnLinear(torch.autograd.Function):
    """``relu?(x @ weight.t() + bias)`` with both products that have ``x``'s rows as theirs
    on oneDNN: see :func:`linear_layer`."""

    @staticmethod
    def forward(ctx, x, weight, bias, relu: bool):
        out = linear(x, weight, bias, relu)
        ctx.save_for_backward(x, weight, out if relu else None)
        ctx.has_bias, ctx.relu = bias is not None, relu
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        x, weight, out = ctx.saved_tensors
        needs = ctx.needs_input_grad
        wants_bias = needs[2] and ctx.has_bias
        if ctx.relu:
            grad, grad_bias = relu_and_bias_backward(grad, out, wants_bias)
        else:
            grad_bias = grad.sum(0) if wants_bias else None
        grad_x = linear(grad, weight.t(), None) if needs[0] else None
        grad_weight = weight_gradient(grad, x) if needs[1] else None
        return grad_x, grad_weight, grad_bias, None


# Rows in a block of the weights' gradient: 1.6 MB of a first layer's 200 float32 inputs.
# Blocks of 4096 rows (3.2 MB, more than the tuning CPU's L2 of 1 MB a core) ran as fast in
# most processes but much slower in some (docs/benchmarks-archive.md, issue 15).
BLOCK_ROWS = 2048
# Fewer rows stay on ``mm``: a partial block's transposes cost more than the blocked product
# gains.
BLOCKED_FROM_ROWS = 4096


def weight_gradient(grad: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``grad.t() @ x``, a linear layer's weights' gradient: ``grad`` ``[rows, out]``, ``x``
    ``[rows, in]``, both float and of one dtype, to ``[out, in]`` (a transposed view where the
    blocks below run).

    Float32 CPU tensors of at least :data:`BLOCKED_FROM_ROWS` rows, with ``x``'s rows contiguous,
    run on oneDNN's inner product where :func:`uses_onednn`: the sum over blocks of
    :data:`BLOCK_ROWS` rows of ``x_block.t() @ grad_block``, each ``x_block`` transposed into
    one reused buffer by the extension's ``transpose_into`` (see the module docstring). The
    blocks are added in order, so the sum does not depend on the thread count. Else torch's
    ``mm``."""
    rows, channels = x.shape
    if not (
        x.dtype == torch.float32
        and grad.dtype == torch.float32
        and rows >= BLOCKED_FROM_ROWS
        and x.stride(1) == 1
        and uses_onednn(x)
        and uses_kernel(x)
    ):
        return grad.t() @ x
    total = torch.zeros(channels, grad.shape[1], dtype=torch.float32)
    buffer = x.new_empty(channels * BLOCK_ROWS)
    for x_block, grad_block in zip(x.split(BLOCK_ROWS), grad.split(BLOCK_ROWS), strict=True):
        x_block_t = buffer[: x_block.numel()].view(channels, x_block.shape[0])
        transpose_into(x_block, x_block_t)
        total += torch.ops.mkldnn._linear_pointwise(x_block_t, grad_block.t(), None, "none", [], "")
    return total.t()


def uses_onednn(x: torch.Tensor) -> bool:
    """Whether :func:`linear` runs oneDNN's inner product on ``x``: a 2-D float32 or
    bfloat16 CPU tensor, not the ``"torch"`` ops backend, torch's oneDNN enabled and checked
    (for bfloat16, where oneDNN has bfloat16 kernels for this CPU)."""
    return (
        x.device.type == "cpu"
        and x.dtype in _ONEDNN_TOLERANCE
        and x.dim() == 2
        and kernels_allowed()
        and torch.backends.mkldnn.is_available()
        and torch.backends.mkldnn.enabled
        and _onednn_product_checks(x.dtype)
    )


# Relative and absolute tolerance of the once-per-process check, by dtype (inputs of
# magnitude about 1, 5 terms a sum).
_ONEDNN_TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 3e-2}


@functools.cache
def _onednn_product_checks(dtype: torch.dtype) -> bool:
    """Whether ``torch.ops.mkldnn._linear_pointwise`` computes ``x @ w.t() + b`` in ``dtype``
    here, on a small problem with a strided input and again with strided weights (``w`` a
    transposed view, as :func:`weight_gradient` passes them), against float64 (once per
    process and dtype)."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(7, 10, generator=generator).to(dtype)[:, ::2]
    weight = torch.randn(3, 5, generator=generator).to(dtype)
    bias = torch.randn(3, generator=generator).to(dtype)
    expected = x.double() @ weight.double().t() + bias.double()
    columns = torch.randn(5, 3, generator=generator).to(dtype)
    expected_strided = x.double() @ columns.double()
    try:
        if dtype == torch.bfloat16 and not torch.ops.mkldnn._is_mkldnn_bf16_supported():
            return False
        got = torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")
        got_strided = torch.ops.mkldnn._linear_pointwise(x, columns.t(), None, "none", [], "")
    except (AttributeError, RuntimeError, TypeError) as error:
        logger.info(
            "oneDNN's %s inner product is unavailable (%s); products run on torch.mm", dtype, error
        )
        return False
    tolerance = _ONEDNN_TOLERANCE[dtype]
    if not all(
        result.shape == reference.shape
        and result.dtype == dtype
        and torch.allclose(result.double(), reference, rtol=tolerance, atol=tolerance)
        for result, reference in ((got, expected), (got_strided, expected_strided))
    ):
        logger.warning(
            "oneDNN's %s inner product disagrees with torch's; products run on torch.mm", dtype
        )
        return False
    return True
