"""A block's aggregations as weighted CSR products, on the extension's CPU kernel.

``weighted_sum(adjacency, x)`` is ``adjacency @ x`` for a weighted adjacency in CSR: the mean
of GraphSAGE (values ``1 / in-degree``) and GCN's normalized sum. On the CPU it runs the
extension's ``csr_sum`` (``csrc/cpu/csr_kernel.cpp``): rows summed in float32 whatever
``x``'s dtype, the scattered sources prefetched, and low-precision rows converted inside the
vectorized row loop, where torch's ``sparse.mm`` converts them element by element (the
comparison is in docs/benchmarks-archive.md, issue 15). Where
:func:`graphengine.ops.backend.uses_kernel` says no (float64, CUDA, the ``"torch"`` backend, no
extension) it is ``torch.sparse.mm``.
"""

from __future__ import annotations

import warnings
from dataclasses import InitVar, dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import torch
from torch.autograd.function import once_differentiable

from graphengine import ops
from graphengine.ops import csr
from graphengine.ops.backend import uses_kernel

if TYPE_CHECKING:  # blocks.py imports the layers that import this
    from graphengine.batch.blocks import Block

# torch warns once per process that sparse CSR tensors are "in beta"; its CPU sparse.mm with a
# reduction has been stable since 2.0 (PyG silences torch's scatter_reduce beta warning alike).
warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")


@dataclass(frozen=True, eq=False)
class CsrAdjacency:
    """A weighted ``[num_rows, num_cols]`` matrix in CSR.

    Attributes:
        rowptr: int64 ``[num_rows + 1]``; row ``i``'s entries are ``rowptr[i]:rowptr[i + 1]``.
        col: int64 ``[num_entries]``, each in ``[0, num_cols)``.
        value: float ``[num_entries]`` (float32, or float64 for float64 inputs); not
            differentiated.
        num_cols: the column count.
        check_entries: check that ``rowptr`` runs from 0 to the entry count without
            decreasing and ``col`` lies in range (three reductions; on a GPU, a wait for
            them). ``False`` where they are known to hold: built from a
            :class:`~graphengine.batch.blocks.Block` (``to_blocks`` checked it) or from a
            checked adjacency.
    """

    rowptr: torch.Tensor
    col: torch.Tensor
    value: torch.Tensor
    num_cols: int
    check_entries: InitVar[bool] = True

    def __post_init__(self, check_entries: bool):
        rowptr, col, value = self.rowptr, self.col, self.value
        if rowptr.dtype != torch.int64 or col.dtype != torch.int64:
            raise TypeError(
                f"'rowptr' and 'col' must be int64 (got {rowptr.dtype} and {col.dtype})"
            )
        if rowptr.dim() != 1 or rowptr.numel() < 1 or col.dim() != 1:
            raise ValueError(
                f"'rowptr' must be 1-D and non-empty and 'col' 1-D (got shapes "
                f"{list(rowptr.shape)} and {list(col.shape)})"
            )
        if value.dim() != 1 or value.numel() != col.numel():
            raise ValueError(
                f"'value' must hold one entry per column index ({col.numel()}) "
                f"(got shape {list(value.shape)})"
            )
        if check_entries:
            self._check_entries()

    def _check_entries(self) -> None:
        rowptr, col = self.rowptr, self.col
        if int(rowptr[0]) != 0 or int(rowptr[-1]) != col.numel():
            raise ValueError(
                f"'rowptr' must run from 0 to {col.numel()} (got {int(rowptr[0])} to "
                f"{int(rowptr[-1])})"
            )
        if bool((rowptr[1:] < rowptr[:-1]).any()):
            raise ValueError("'rowptr' must not decrease")
        if col.numel() and (int(col.min()) < 0 or int(col.max()) >= self.num_cols):
            raise IndexError(
                f"'col' holds indices in [{int(col.min())}, {int(col.max())}], outside "
                f"[0, {self.num_cols})"
            )

    @property
    def num_rows(self) -> int:
        return self.rowptr.numel() - 1

    @cached_property
    def transposed(self) -> CsrAdjacency:
        """``[num_cols, num_rows]``: the entries grouped by column, in row order within one.
        On the CPU with the extension (float32 values), a counting sort in one kernel;
        elsewhere a stable sort."""
        col = self.col
        if self.value.dtype == torch.float32 and uses_kernel(self.value):
            rowptr, row, value = csr.csr_transpose(self.rowptr, col, self.value, self.num_cols)
            return CsrAdjacency(rowptr, row, value, self.num_rows, False)
        order = torch.argsort(col, stable=True)
        rowptr = torch.zeros(self.num_cols + 1, dtype=torch.int64, device=col.device)
        torch.cumsum(torch.bincount(col, minlength=self.num_cols), 0, out=rowptr[1:])
        degree = self.rowptr[1:] - self.rowptr[:-1]
        row = torch.arange(self.num_rows, device=col.device).repeat_interleave(
            degree, output_size=col.numel()
        )
        return CsrAdjacency(rowptr, row[order], self.value[order], self.num_rows, False)


@dataclass(frozen=True, eq=False)
class IndexedRows:
    """The rows ``table[index]`` of a feature table, not gathered: ``[len(index), width]``.

    A batch's features as its node ids into the whole table. The first layer's aggregation
    reads each row where it lies (:func:`weighted_sum` with ``out``), so no batch tensor of
    the rows is made; but a source that several edges share is read from the whole table each
    time, where a gathered batch tensor is smaller and denser (the ``Trainer``'s
    ``aggregate_from_store`` gives the figures).

    Attributes:
        table: ``[num_nodes, width]``, rows contiguous.
        index: int64 ``[rows]``, each in ``[0, num_nodes)`` (checked where the rows are read).
    """

    table: torch.Tensor
    index: torch.Tensor

    @property
    def shape(self) -> torch.Size:
        return torch.Size((self.index.shape[0], self.table.shape[1]))

    @property
    def dtype(self) -> torch.dtype:
        return self.table.dtype

    def __getitem__(self, rows: slice) -> IndexedRows:
        """The first rows, as ``x[:n]`` of a tensor."""
        return IndexedRows(self.table, self.index[rows])

    def gather(self) -> torch.Tensor:
        """``table[index]`` as a tensor ``[len(index), width]``."""
        return ops.gather_rows(self.table, self.index)


def value_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype of an adjacency's values for inputs of ``dtype``: float64 for float64 (the
    torch path, for exact checks), else float32 (the kernel's)."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def mean_adjacency(block: Block, dtype: torch.dtype) -> CsrAdjacency:
    """The block's mean aggregation: ``[num_dst, num_src]``, values ``1 / in-degree``, for
    inputs of ``dtype``."""
    degree = block.rowptr[1:] - block.rowptr[:-1]
    scale = (1.0 / degree.clamp(min=1).to(value_dtype(dtype))).repeat_interleave(
        degree, output_size=block.edge_index.shape[1]
    )
    return CsrAdjacency(block.rowptr, block.edge_index[0], scale, block.num_src, False)


def sum_adjacency(block: Block, dtype: torch.dtype) -> CsrAdjacency:
    """The block's sum aggregation: ``[num_dst, num_src]``, values 1, for inputs of
    ``dtype``."""
    ones = torch.ones(
        block.edge_index.shape[1], dtype=value_dtype(dtype), device=block.rowptr.device
    )
    return CsrAdjacency(block.rowptr, block.edge_index[0], ones, block.num_src, False)


def weighted_sum(
    adjacency: CsrAdjacency,
    x: torch.Tensor | IndexedRows,
    out: torch.Tensor | None = None,
    root_out: torch.Tensor | None = None,
    relu: bool = False,
) -> torch.Tensor:
    """``adjacency @ x``: ``x`` ``[num_cols, width]`` to ``[num_rows, width]`` in ``x``'s
    dtype (rows without entries are zeros). Differentiable in ``x``, except when written into
    ``out`` (``[num_rows, width]``, ``x``'s dtype, contiguous rows: e.g. the left columns of
    a wider table), which is for autograd functions' own forward passes. With ``root_out``
    (``out`` given too; the same shape and dtype), ``x[:num_rows]`` is copied into it in the
    same pass: GraphSAGE's root term beside its mean. With ``relu`` (``out`` given too), the
    product and the copy are of ``relu(x)``, applied as the rows are read: ``x`` is a layer's
    output before the ReLU after it, which then takes no pass of its own. ``x`` may be
    :class:`IndexedRows` when written into ``out``: the CPU kernel reads the rows from the
    table."""
    if len(x.shape) != 2 or x.shape[0] != adjacency.num_cols:
        raise ValueError(
            f"'x' must be 2-D with {adjacency.num_cols} rows (got shape {list(x.shape)})"
        )
    if out is None:
        if root_out is not None or relu:
            raise ValueError("'root_out' and 'relu' need 'out'")
        if isinstance(x, IndexedRows):
            x = x.gather()
        return _WeightedSum.apply(adjacency, x)
    expected = [adjacency.num_rows, x.shape[1]]
    for name, given in (("out", out), ("root_out", root_out)):
        if given is not None and (list(given.shape) != expected or given.dtype != x.dtype):
            raise ValueError(
                f"'{name}' must be {x.dtype} of shape {expected} (got {given.dtype} of shape "
                f"{list(given.shape)})"
            )
    if isinstance(x, IndexedRows):
        if uses_kernel(x.table):
            return _product(adjacency, x.table, out, root_out, x.index.contiguous(), relu)
        x = x.gather()
    if torch.is_grad_enabled() and x.requires_grad:
        raise RuntimeError("weighted_sum(..., out=) does not differentiate; call it without")
    return _product(adjacency, x, out, root_out, relu=relu)


def input_gradient(
    adjacency: CsrAdjacency,
    grad: torch.Tensor,
    root_grad: torch.Tensor | None = None,
    relu_input: torch.Tensor | None = None,
    column_sums: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The gradient reaching an aggregating layer's input, and its column sums.

    The gradient ``[num_cols, width]`` in ``grad``'s dtype is ``adjacency.transposed @ grad``
    (``grad`` ``[num_rows, width]``: the aggregation's output gradient), plus ``root_grad``
    (``[<= num_cols, width]``: the root term's gradient) on its first rows, and, with
    ``relu_input`` (``[num_cols, width]``, ``grad``'s dtype: what the ReLU that gave the layer
    its input was given), zero where that is ``<= 0``: the ReLU's backward (NaN keeps its
    gradient). The column sums
    ``[width]`` (the gradient of a bias added before the ReLU; ``None`` without
    ``column_sums``) come in the same pass on the CPU kernel. Not differentiable."""
    transposed = adjacency.transposed
    if uses_kernel(grad):
        result, sums = csr.input_gradient(
            transposed.rowptr,
            transposed.col,
            transposed.value.to(torch.float32),
            *(_contiguous_rows(t) for t in (grad, root_grad, relu_input)),
            column_sums,
        )
        return result, sums if column_sums else None
    result = _product(transposed, grad.contiguous())
    if root_grad is not None:
        result[: root_grad.shape[0]] += root_grad
    if relu_input is not None:
        result.masked_fill_(relu_input <= 0, 0)
    return result, result.sum(0) if column_sums else None


def _product(
    adjacency: CsrAdjacency,
    x: torch.Tensor,
    out: torch.Tensor | None = None,
    root_out: torch.Tensor | None = None,
    index: torch.Tensor | None = None,
    relu: bool = False,
) -> torch.Tensor:
    """``adjacency @ x`` (into ``out``, with ``root_out`` and ``relu``: see
    :func:`weighted_sum`). With ``index`` (the kernel and ``out`` only), the sources are
    ``x``'s rows ``index``."""
    if uses_kernel(x):
        value = adjacency.value.to(torch.float32)
        args = (adjacency.rowptr, adjacency.col, value, _contiguous_rows(x))
        if out is None:
            return csr.csr_sum(*args)
        csr.csr_sum_into(*args, out, root_out, index, relu)
        return out
    if relu:
        x = torch.relu(x)
    if root_out is not None:
        root_out.copy_(x[: adjacency.num_rows])
    if out is not None:
        return out.copy_(_product(adjacency, x))
    # On the CPU, low-precision inputs are summed in float32 with float32 weights, as the
    # kernel sums them; CUDA's sparse products accumulate in float32 themselves.
    on_cpu = x.device.type == "cpu"
    dtype = torch.float32 if on_cpu and x.dtype != torch.float64 else x.dtype
    matrix = torch.sparse_csr_tensor(
        adjacency.rowptr,
        adjacency.col,
        adjacency.value.to(dtype),
        size=(adjacency.num_rows, adjacency.num_cols),
        check_invariants=False,  # the adjacency's construction checked them
    )
    if on_cpu:  # torch's parallel CSR kernel (a plain product sorts a COO copy)
        return torch.sparse.mm(matrix, x.to(dtype), "sum").to(x.dtype)
    return torch.sparse.mm(matrix, x)


def _contiguous_rows(table: torch.Tensor | None) -> torch.Tensor | None:
    """``table`` (2-D) itself if its rows are contiguous (any row stride), else a copy."""
    if table is None or table.shape[1] <= 1 or table.stride(1) == 1:
        return table
    return table.contiguous()


class _WeightedSum(torch.autograd.Function):
    @staticmethod
    def forward(ctx, adjacency, x):
        ctx.adjacency = adjacency
        return _product(adjacency, x)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        if not ctx.needs_input_grad[1]:
            return None, None
        return None, _product(ctx.adjacency.transposed, grad.contiguous())
