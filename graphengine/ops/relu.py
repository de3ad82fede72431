"""The dense layers' ReLU helpers (``csrc/relu.cpp``, CPU kernels in ``csrc/cpu/relu_kernel.cpp``)
and their fake kernels: bias and ReLU in one pass, and the ReLU's backward with the bias
gradient in one pass. Tensors are ``[rows, channels]``, contiguous, float32, bfloat16 or
float16, on the CPU."""

from __future__ import annotations

import torch

from graphengine.ops.build import fake_kernel


def bias_relu_(out: torch.Tensor, bias: torch.Tensor | None = None) -> None:
    """``out = max(out + bias, 0)`` in place (NaN stays NaN, as torch's ReLU keeps it);
    ``bias`` ``[channels]`` of ``out``'s dtype, or ``None`` for the ReLU alone."""
    torch.ops.graphengine.bias_relu_(out, bias)


def relu_backward_sum(grad: torch.Tensor, out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``grad`` zeroed where the ReLU's ``out <= 0`` (as torch's ``threshold_backward``: NaN
    keeps its gradient), and its column sums ``[channels]`` (the gradient of a bias added
    before the ReLU, independent of the thread count), both in ``grad``'s dtype."""
    return torch.ops.graphengine.relu_backward_sum(grad, out)


@fake_kernel("bias_relu_")
def _fake_bias_relu_(out, bias=None):
    return None


@fake_kernel("relu_backward_sum")
def _fake_relu_backward_sum(grad, out):
    return torch.empty_like(grad), grad.new_empty(grad.shape[1])
