"""``transpose_into`` (``csrc/transpose.cpp``, CPU kernel in ``csrc/cpu/transpose_kernel.cpp``)
and its fake kernel."""

from __future__ import annotations

import torch

from graphengine.ops.build import fake_kernel


def transpose_into(src: torch.Tensor, out: torch.Tensor) -> None:
    """``out = src.t()``: ``src`` ``[rows, channels]`` with contiguous rows (any row stride)
    into a contiguous ``[channels, rows]`` ``out``, both float32, bfloat16 or float16 (the
    same) on the CPU; values copied unchanged."""
    torch.ops.graphengine.transpose_into(src, out)


@fake_kernel("transpose_into")
def _fake_transpose_into(src, out):
    return None
