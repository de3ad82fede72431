"""The weighted CSR products (``csrc/csr.cpp``, CPU kernels in ``csrc/cpu/csr_kernel.cpp``) and
their fake kernels: ``adjacency @ x`` over a block's CSR adjacency, its backward and the
adjacency's transpose. CPU only: :func:`graphengine.ops.backend.uses_kernel` says where they run.

Shapes: ``rowptr`` int64 ``[num_rows + 1]``, ``col`` int64 ``[num_edges]`` in
``[0, x.shape[0])``, ``value`` float32 ``[num_edges]`` or ``None`` (ones), ``x`` float32,
bfloat16 or float16 ``[num_src, width]`` with contiguous rows. Rows are summed in float32.
"""

from __future__ import annotations

import torch

from graphengine.ops.build import fake_kernel


def csr_sum(
    rowptr: torch.Tensor, col: torch.Tensor, value: torch.Tensor | None, x: torch.Tensor
) -> torch.Tensor:
    """``out[i] = sum over e in [rowptr[i], rowptr[i + 1]) of value[e] * x[col[e]]``: a new
    contiguous ``[num_rows, width]`` tensor of ``x``'s dtype."""
    return torch.ops.graphengine.csr_sum(rowptr, col, value, x)


def csr_sum_into(
    rowptr: torch.Tensor,
    col: torch.Tensor,
    value: torch.Tensor | None,
    x: torch.Tensor,
    out: torch.Tensor,
    root_out: torch.Tensor | None = None,
    index: torch.Tensor | None = None,
    relu: bool = False,
) -> None:
    """:func:`csr_sum` into ``out`` (``[num_rows, width]``, ``x``'s dtype, rows contiguous:
    e.g. the left columns of a wider table). With ``root_out`` (same shape), ``x``'s first
    ``num_rows`` rows are copied into it in the same pass; with ``index`` (int64
    ``[num_sources]``), the sources are ``x[index]`` read where they lie (``col`` points into
    ``index``); with ``relu``, the sources and root rows are ``max(x, 0)`` (NaN stays NaN)."""
    torch.ops.graphengine.csr_sum_into(rowptr, col, value, x, out, root_out, index, relu)


def input_gradient(
    rowptr: torch.Tensor,
    col: torch.Tensor,
    value: torch.Tensor | None,
    grad: torch.Tensor,
    root_grad: torch.Tensor | None = None,
    relu_input: torch.Tensor | None = None,
    column_sums: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """A layer's backward through its aggregation, over the transposed adjacency: the
    ``[num_rows, width]`` sum of ``grad``'s rows in ``grad``'s dtype, plus ``root_grad``
    (``[<= num_rows, width]``) on the first rows, zeroed where ``relu_input``
    (``[num_rows, width]``) is ``<= 0``; and its column sums ``[width]`` (an empty ``[0]``
    without ``column_sums``), independent of the thread count."""
    return torch.ops.graphengine.input_gradient(
        rowptr, col, value, grad, root_grad, relu_input, column_sums
    )


def csr_transpose(
    rowptr: torch.Tensor, col: torch.Tensor, value: torch.Tensor | None, num_cols: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The ``[num_cols, num_rows]`` transpose, entries grouped by column in row order (a
    counting sort): its int64 ``rowptr`` ``[num_cols + 1]``, its int64 ``col`` (the rows)
    ``[num_edges]`` and its float32 ``value`` ``[num_edges]`` (ones without ``value``)."""
    return torch.ops.graphengine.csr_transpose(rowptr, col, value, num_cols)


@fake_kernel("csr_sum")
def _fake_csr_sum(rowptr, col, value, x):
    return x.new_empty((rowptr.shape[0] - 1, x.shape[1]))


@fake_kernel("csr_sum_into")
def _fake_csr_sum_into(rowptr, col, value, x, out, root_out=None, index=None, relu=False):
    return None


@fake_kernel("input_gradient")
def _fake_input_gradient(
    rowptr, col, value, grad, root_grad=None, relu_input=None, column_sums=True
):
    sums = grad.new_empty(grad.shape[1] if column_sums else 0)
    return grad.new_empty((rowptr.shape[0] - 1, grad.shape[1])), sums


@fake_kernel("csr_transpose")
def _fake_csr_transpose(rowptr, col, value, num_cols):
    return (
        rowptr.new_empty(num_cols + 1),
        col.new_empty(col.shape),
        col.new_empty(col.shape, dtype=torch.float32),
    )
