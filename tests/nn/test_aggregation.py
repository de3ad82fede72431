"""The CSR aggregation kernel (``csr_sum``) and ``weighted_sum``: against scipy's sparse product
in float64, bfloat16 rounding as torch rounds, gradients against the dense product, bad input."""

import numpy as np
import pytest
import scipy.sparse
import torch

from graphengine import ops
from graphengine.nn.aggregation import CsrAdjacency, IndexedRows, input_gradient, weighted_sum

pytestmark = pytest.mark.skipif(
    not ops.build_extension(), reason="graphengine's C++ extension is not built"
)


def random_adjacency(num_rows=70, num_cols=50, num_entries=400, seed=0) -> CsrAdjacency:
    """Repeated entries, and rows 0, 3 and the last without any."""
    generator = torch.Generator().manual_seed(seed)
    row = torch.randint(1, num_rows - 1, (num_entries,), generator=generator)
    row = row[row != 3].sort().values
    col = torch.randint(0, num_cols, (row.numel(),), generator=generator)
    value = torch.rand(row.numel(), generator=generator) + 0.5
    rowptr = torch.zeros(num_rows + 1, dtype=torch.int64)
    torch.cumsum(torch.bincount(row, minlength=num_rows), 0, out=rowptr[1:])
    return CsrAdjacency(rowptr, col, value, num_cols)


def scipy_product(adjacency: CsrAdjacency, x: torch.Tensor) -> np.ndarray:
    matrix = scipy.sparse.csr_matrix(
        (adjacency.value.double().numpy(), adjacency.col.numpy(), adjacency.rowptr.numpy()),
        shape=(adjacency.num_rows, adjacency.num_cols),
    )
    return matrix @ x.double().numpy()


@pytest.mark.parametrize(
    ("dtype", "tolerance"),
    [(torch.float32, 1e-5), (torch.bfloat16, 1e-2), (torch.float16, 2e-3)],
    ids=["float32", "bfloat16", "float16"],
)
@pytest.mark.parametrize("width", [1, 7, 100, 257])
def test_kernel_equals_scipy(dtype, tolerance, width):
    adjacency = random_adjacency()
    x = torch.randn(adjacency.num_cols, width).to(dtype)
    out = torch.ops.graphengine.csr_sum(adjacency.rowptr, adjacency.col, adjacency.value, x)
    assert out.dtype == dtype and out.shape == (adjacency.num_rows, width)
    np.testing.assert_allclose(
        out.double().numpy(), scipy_product(adjacency, x), rtol=tolerance, atol=tolerance
    )
    assert not out[[0, 3, adjacency.num_rows - 1]].any()


def test_bfloat16_results_are_float32_sums_rounded_as_torch_rounds():
    adjacency = random_adjacency(num_entries=2000)
    x = torch.randn(adjacency.num_cols, 64).to(torch.bfloat16)
    args = (adjacency.rowptr, adjacency.col, adjacency.value)
    summed = torch.ops.graphengine.csr_sum(*args, x.float())
    assert torch.equal(torch.ops.graphengine.csr_sum(*args, x), summed.to(torch.bfloat16))


def test_without_values_sums_and_strided_rows_are_read_in_place():
    adjacency = random_adjacency()
    wide = torch.randn(adjacency.num_cols, 12)
    x = wide[:, 2:9]  # rows 12 apart
    out = torch.ops.graphengine.csr_sum(adjacency.rowptr, adjacency.col, None, x)
    ones = CsrAdjacency(
        adjacency.rowptr, adjacency.col, torch.ones_like(adjacency.value), adjacency.num_cols
    )
    np.testing.assert_allclose(out.numpy(), scipy_product(ones, x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", ["csrc", "torch"])
def test_weighted_sum_and_its_gradient_equal_the_dense_product(backend):
    adjacency = random_adjacency()
    dense = torch.zeros(adjacency.num_rows, adjacency.num_cols, dtype=torch.float64)
    row = torch.arange(adjacency.num_rows).repeat_interleave(adjacency.rowptr.diff())
    dense.index_put_((row, adjacency.col), adjacency.value.double(), accumulate=True)
    x = torch.randn(adjacency.num_cols, 9, requires_grad=True)
    grad = torch.randn(adjacency.num_rows, 9)
    previous = ops.get_backend()
    ops.set_backend(backend)
    try:
        out = weighted_sum(adjacency, x)
        out.backward(grad)
    finally:
        ops.set_backend(previous)
    reference = dense @ x.detach().double()
    torch.testing.assert_close(out.double(), reference, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(x.grad.double(), dense.t() @ grad.double(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", ["csrc", "torch"])
def test_transposed_groups_the_entries_by_column_in_row_order(backend):
    adjacency = random_adjacency(num_entries=800)
    previous = ops.get_backend()
    ops.set_backend(backend)
    try:
        transposed = adjacency.transposed
    finally:
        ops.set_backend(previous)
    assert transposed.num_rows == adjacency.num_cols
    assert transposed.num_cols == adjacency.num_rows
    assert transposed.value.dtype == adjacency.value.dtype
    # Brute force: each column's (row, value) pairs in the order the rows hold them.
    row = torch.arange(adjacency.num_rows).repeat_interleave(adjacency.rowptr.diff())
    for column in range(adjacency.num_cols):
        entries = (adjacency.col == column).nonzero().flatten()
        span = slice(int(transposed.rowptr[column]), int(transposed.rowptr[column + 1]))
        assert torch.equal(transposed.col[span], row[entries])
        assert torch.equal(transposed.value[span], adjacency.value[entries])
    assert int(transposed.rowptr[-1]) == adjacency.col.numel()


def test_csr_transpose_without_values_and_bad_input():
    adjacency = random_adjacency()
    rowptr, col = adjacency.rowptr, adjacency.col
    transpose = torch.ops.graphengine.csr_transpose
    rowptr_t, row_t, value_t = transpose(rowptr, col, None, 50)
    assert torch.equal(value_t, torch.ones(col.numel()))
    assert torch.equal(rowptr_t, adjacency.transposed.rowptr)
    assert torch.equal(row_t, adjacency.transposed.col)
    bad = col.clone()
    bad[5] = 50
    with pytest.raises(IndexError, match="csr_transpose: 'col' holds 50 at position 5"):
        transpose(rowptr, bad, None, 50)
    with pytest.raises(RuntimeError, match="'num_cols' must be >= 0"):
        transpose(rowptr, col, None, -1)
    with pytest.raises(RuntimeError, match="'value' must be a contiguous float32"):
        transpose(rowptr, col, adjacency.value[:-1], 50)


@pytest.mark.parametrize("backend", ["csrc", "torch"])
def test_root_rows_are_copied_beside_the_sum(backend):
    adjacency = random_adjacency()
    x = torch.randn(adjacency.num_rows + 5, 6)
    square = CsrAdjacency(adjacency.rowptr, adjacency.col, adjacency.value, x.shape[0])
    table = torch.full((adjacency.num_rows, 12), float("nan"))
    previous = ops.get_backend()
    ops.set_backend(backend)
    try:
        weighted_sum(square, x, out=table[:, :6], root_out=table[:, 6:])
    finally:
        ops.set_backend(previous)
    np.testing.assert_allclose(table[:, :6].numpy(), scipy_product(square, x), atol=1e-5)
    assert torch.equal(table[:, 6:], x[: adjacency.num_rows])


@pytest.mark.parametrize("backend", ["csrc", "torch"])
@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.bfloat16, torch.float16], ids=["float32", "bfloat16", "half"]
)
def test_a_relu_is_applied_to_the_rows_as_they_are_read(backend, dtype):
    """With ``relu``, the sum and the root copy are those of ``relu(x)``: NaN stays NaN."""
    adjacency = random_adjacency()
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(adjacency.num_rows + 5, 6, generator=generator).to(dtype)
    x[3, 1] = float("nan")
    x[4, 2] = -0.0
    square = CsrAdjacency(adjacency.rowptr, adjacency.col, adjacency.value, x.shape[0])
    table = torch.full((adjacency.num_rows, 12), float("nan"), dtype=dtype)
    previous = ops.get_backend()
    ops.set_backend(backend)
    try:
        weighted_sum(square, x, out=table[:, :6], root_out=table[:, 6:], relu=True)
    finally:
        ops.set_backend(previous)
    rectified = torch.relu(x.double())
    expected = torch.from_numpy(scipy_product(square, rectified))
    reads_nan = torch.zeros(adjacency.num_rows, 6, dtype=torch.bool)
    for i in range(adjacency.num_rows):  # rows summing row 3 (NaN in column 1)
        edges = adjacency.col[adjacency.rowptr[i] : adjacency.rowptr[i + 1]]
        reads_nan[i, 1] = bool((edges == 3).any())
    assert torch.equal(table[:, :6].isnan(), reads_nan)
    np.testing.assert_allclose(
        table[:, :6].double()[~reads_nan].numpy(),
        expected[~reads_nan].numpy(),
        rtol=1e-2 if dtype != torch.float32 else 1e-5,
        atol=2e-2 if dtype != torch.float32 else 1e-5,
    )
    torch.testing.assert_close(
        table[:, 6:], torch.relu(x[: adjacency.num_rows]), rtol=0, atol=0, equal_nan=True
    )
    with pytest.raises(ValueError, match="'root_out' and 'relu' need 'out'"):
        weighted_sum(square, x, relu=True)


@pytest.mark.parametrize("backend", ["csrc", "torch"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
def test_input_gradient_adds_the_root_term_and_does_the_relus_backward(backend, dtype):
    adjacency = random_adjacency()  # [70, 50]: the gradient reaches 50 input rows
    generator = torch.Generator().manual_seed(1)
    grad = torch.randn(adjacency.num_rows, 8, generator=generator).to(dtype)
    wide = torch.randn(30, 16, generator=generator).to(dtype)  # root rows, strided
    relu_input = torch.randn(adjacency.num_cols, 16, generator=generator).to(dtype)[:, ::2]
    relu_input[4, 2] = float("nan")  # its gradient is kept, as the kernels' ReLU keeps NaN
    relu_input[5, 3] = -0.0
    relu_out = torch.relu(relu_input)
    previous = ops.get_backend()
    ops.set_backend(backend)
    try:
        got, column_sum = input_gradient(adjacency, grad, wide[:, 8:], relu_input)
        unsummed, no_sum = input_gradient(adjacency, grad, wide[:, 8:], relu_input, False)
        plain, _ = input_gradient(adjacency, grad)
    finally:
        ops.set_backend(previous)
    transposed = CsrAdjacency(adjacency.rowptr, adjacency.col, adjacency.value, 50).transposed
    expected = torch.from_numpy(scipy_product(transposed, grad))
    np.testing.assert_allclose(plain.double().numpy(), expected.numpy(), rtol=1e-2, atol=1e-2)
    expected[:30] += wide[:, 8:].double()
    expected[(relu_out <= 0)] = 0
    assert no_sum is None and torch.equal(unsummed, got)
    assert got.dtype == dtype and got.shape == (50, 8)
    assert not got[relu_out <= 0].any()
    np.testing.assert_allclose(got.double().numpy(), expected.numpy(), rtol=1e-2, atol=1e-2)
    assert column_sum.dtype == dtype
    np.testing.assert_allclose(
        column_sum.double().numpy(), expected.sum(0).numpy(), rtol=2e-2, atol=5e-2
    )
    if dtype == torch.float32:
        np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-5, atol=1e-5)


def test_input_gradient_refuses_tables_of_the_wrong_shape():
    adjacency = random_adjacency()
    grad = torch.randn(adjacency.num_rows, 4)
    with pytest.raises(RuntimeError, match=r"'root_grad' must be a CPU Float \[<= 50, 4\]"):
        input_gradient(adjacency, grad, torch.randn(51, 4))
    with pytest.raises(RuntimeError, match=r"'relu_input' must be a CPU Float \[50, 4\]"):
        input_gradient(adjacency, grad, None, torch.randn(49, 4))
    with pytest.raises(RuntimeError, match=r"'relu_input' must be a CPU Float .* \(got BFloat16"):
        input_gradient(adjacency, grad, None, torch.randn(50, 4).bfloat16())


@pytest.mark.parametrize("backend", ["csrc", "torch"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
def test_indexed_rows_are_read_from_the_table_as_gathered_rows_are(backend, dtype):
    adjacency = random_adjacency()  # 70 rows over 50 sources
    generator = torch.Generator().manual_seed(2)
    table = torch.randn(200, 6, generator=generator).to(dtype)
    index = torch.randperm(200, generator=generator)[:72]  # 72 >= 70 rows for the root copy
    square = CsrAdjacency(adjacency.rowptr, adjacency.col, adjacency.value, 72)
    got = torch.full((70, 12), float("nan"), dtype=dtype)
    expected = torch.full((70, 12), float("nan"), dtype=dtype)
    previous = ops.get_backend()
    ops.set_backend(backend)
    try:
        weighted_sum(square, IndexedRows(table, index), got[:, :6], got[:, 6:])
    finally:
        ops.set_backend(previous)
    weighted_sum(square, table[index], expected[:, :6], expected[:, 6:])
    assert torch.equal(got, expected)
    rows = IndexedRows(table, index)
    assert rows.shape == (72, 6) and rows[:10].shape == (10, 6)
    assert torch.equal(rows[:10].gather(), table[index[:10]])


def test_indexed_rows_refuse_ids_outside_the_table():
    adjacency = random_adjacency()
    table = torch.randn(200, 6)
    index = torch.arange(50)
    index[9] = 200
    out = torch.empty(70, 6)
    with pytest.raises(IndexError, match=r"'index' holds 200 at position 9, outside \[0, 200\)"):
        weighted_sum(adjacency, IndexedRows(table, index), out)
    past_the_index = adjacency.col.clamp(max=49) + 1  # up to 50, for 50 indexed sources
    with pytest.raises(IndexError, match="'col' holds 50 at position"):
        torch.ops.graphengine.csr_sum_into(
            adjacency.rowptr, past_the_index, None, table, out, None, torch.arange(50)
        )


def test_root_rows_need_an_output_and_enough_rows():
    adjacency = random_adjacency()  # 70 rows, 50 columns: x has fewer rows than the result
    x = torch.randn(adjacency.num_cols, 4)
    args = (adjacency.rowptr, adjacency.col, adjacency.value, x)
    out, root = torch.empty(adjacency.num_rows, 4), torch.empty(adjacency.num_rows, 4)
    with pytest.raises(RuntimeError, match="'root_out' needs at least 70 sources \\(got 50\\)"):
        torch.ops.graphengine.csr_sum_into(*args, out, root)
    with pytest.raises(ValueError, match="'root_out' and 'relu' need 'out'"):
        weighted_sum(adjacency, x, root_out=root)
    with pytest.raises(ValueError, match=r"'root_out' must be torch\.float32 of shape \[70, 4\]"):
        weighted_sum(adjacency, x, out=out, root_out=root[:, :3])
    wide = torch.randn(80, 4)  # enough rows
    with pytest.raises(RuntimeError, match="single memory location"):
        torch.ops.graphengine.csr_sum_into(adjacency.rowptr, adjacency.col, None, wide, out, out)


@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_bias_relu_equals_torchs_add_then_relu(dtype, with_bias):
    generator = torch.Generator().manual_seed(0)
    out = torch.randn(300, 37, generator=generator).to(dtype)
    out[5, 3] = float("nan")  # relu keeps NaN
    bias = torch.randn(37, generator=generator).to(dtype) if with_bias else None
    expected = (out + bias).relu() if with_bias else out.relu()
    torch.ops.graphengine.bias_relu_(out, bias)
    assert torch.equal(out.isnan(), expected.isnan())
    assert torch.equal(out.nan_to_num(), expected.nan_to_num())


def test_bias_relu_refuses_bad_input():
    out = torch.randn(4, 3)
    bias_relu_ = torch.ops.graphengine.bias_relu_
    with pytest.raises(RuntimeError, match=r"'bias' must be a CPU Float \[3\] .*got Float \[4\]"):
        bias_relu_(out, torch.randn(4))
    with pytest.raises(RuntimeError, match=r"'bias' must be a CPU Float \[3\] tensor \(got Double"):
        bias_relu_(out, torch.randn(3).double())
    with pytest.raises(RuntimeError, match="contiguous 2-D"):
        bias_relu_(out.t(), torch.randn(4))


def test_float64_runs_on_torch_in_float64():
    adjacency = random_adjacency()
    value64 = adjacency.value.double()
    adjacency = CsrAdjacency(adjacency.rowptr, adjacency.col, value64, adjacency.num_cols)
    x = torch.randn(adjacency.num_cols, 5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda y: weighted_sum(adjacency, y), (x,))


def test_bad_input_is_refused_with_the_value():
    adjacency = random_adjacency()
    rowptr, col, value = adjacency.rowptr, adjacency.col, adjacency.value
    x = torch.randn(adjacency.num_cols, 4)
    csr_sum = torch.ops.graphengine.csr_sum
    csr_sum_into = torch.ops.graphengine.csr_sum_into
    with pytest.raises(ValueError, match=r"'x' must be 2-D with 50 rows \(got shape \[49, 4\]\)"):
        weighted_sum(adjacency, x[:49])
    bad = col.clone()
    bad[5] = 50
    with pytest.raises(IndexError, match="'col' holds 50 at position 5, outside"):
        csr_sum(rowptr, bad, value, x)
    bad = col.clone()
    bad[7] = -1
    with pytest.raises(IndexError, match="'col' holds -1 at position 7"):
        csr_sum(rowptr, bad, value, x)
    bad = rowptr.clone()
    bad[10] = bad[12] + 1
    with pytest.raises(RuntimeError, match="'rowptr' decreases at 10"):
        csr_sum(bad, col, value, x)
    big = random_adjacency(num_rows=10000, num_entries=30000)  # rows checked in chunks
    bad = big.rowptr.clone()
    bad[5000:9000] = -(10**9)  # a chunk may start inside the decrease: it must not read col
    with pytest.raises(RuntimeError, match="'rowptr' decreases at 4999"):
        csr_sum(bad, big.col, big.value, x)
    with pytest.raises(RuntimeError, match=rf"'rowptr' must run from 0 to {col.numel() - 1}"):
        csr_sum(rowptr, col[:-1], value[:-1], x)
    with pytest.raises(RuntimeError, match="'value' must be a contiguous float32"):
        csr_sum(rowptr, col, value.double(), x)
    with pytest.raises(RuntimeError, match="'x' must be float32, bfloat16 or float16"):
        csr_sum(rowptr, col, value, x.double())
    with pytest.raises(RuntimeError, match="int64"):
        csr_sum(rowptr.int(), col, value, x)
    with pytest.raises(RuntimeError, match="contiguous rows"):
        csr_sum(rowptr, col, value, x.t().contiguous().t())
    square = torch.randn(adjacency.num_rows, 4)
    args = (rowptr, col, value)
    with pytest.raises(RuntimeError, match="single memory location"):
        csr_sum_into(*args, square[: adjacency.num_cols], square[: adjacency.num_rows])
    with pytest.raises(RuntimeError, match="single memory location"):
        csr_sum_into(*args, x, torch.zeros(4).expand(adjacency.num_rows, 4))
    with pytest.raises(ValueError, match=r"'out' must be torch\.float32 of shape"):
        weighted_sum(adjacency, x, out=torch.empty(3, 4))


def test_malformed_adjacencies_are_refused_before_any_product():
    adjacency = random_adjacency()
    rowptr, col, value = adjacency.rowptr, adjacency.col, adjacency.value
    with pytest.raises(TypeError, match="must be int64"):
        CsrAdjacency(rowptr.int(), col, value, 50)
    with pytest.raises(ValueError, match="one entry per column index"):
        CsrAdjacency(rowptr, col, value[:-1], 50)
    x = torch.randn(50, 3, dtype=torch.float64)  # float64: torch's product, unchecked by it
    bad = col.clone()
    bad[3] = 50
    with pytest.raises(IndexError, match=r"outside \[0, 50\)"):
        weighted_sum(CsrAdjacency(rowptr, bad, value.double(), 50), x)
    rest = (col, value.double(), 50)
    short = rowptr.clone()
    short[-1] -= 1
    with pytest.raises(ValueError, match="'rowptr' must run from 0"):
        weighted_sum(CsrAdjacency(short, *rest), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_relu_backward_sum_equals_torchs_two_passes(dtype):
    generator = torch.Generator().manual_seed(0)
    rows = 1300  # several blocks of rows, the last one partial
    out = torch.randn(rows, 37, generator=generator).relu_().to(dtype)
    out[5, 3] = float("nan")  # threshold_backward keeps a NaN output's gradient
    grad = torch.randn(rows, 37, generator=generator).to(dtype)
    grad_in, column_sum = torch.ops.graphengine.relu_backward_sum(grad, out)
    expected = torch.ops.aten.threshold_backward(grad, out, 0)
    assert torch.equal(grad_in, expected)
    assert column_sum.dtype == dtype
    torch.testing.assert_close(
        column_sum.double(),
        expected.double().sum(0),
        rtol=1e-2 if dtype != torch.float32 else 1e-5,
        atol=1e-3,
    )


def test_relu_backward_sum_refuses_bad_input():
    grad = torch.randn(4, 3)
    relu_backward_sum = torch.ops.graphengine.relu_backward_sum
    with pytest.raises(RuntimeError, match="must be contiguous 2-D tensors of one shape"):
        relu_backward_sum(grad, torch.randn(4, 2))
    with pytest.raises(RuntimeError, match="must both be float32, bfloat16 or float16"):
        relu_backward_sum(grad.double(), grad.double())
    with pytest.raises(RuntimeError, match="must both be float32, bfloat16 or float16"):
        relu_backward_sum(grad, grad.bfloat16())


def test_operators_pass_torch_opcheck():
    adjacency = random_adjacency()
    args = (adjacency.rowptr, adjacency.col, adjacency.value)
    x = torch.randn(adjacency.num_rows + 2, 5)
    square = (*args, x)
    ops_ = torch.ops.graphengine
    torch.library.opcheck(ops_.csr_sum.default, (*args, x[: adjacency.num_cols]))
    table = torch.empty(adjacency.num_rows, 10)
    torch.library.opcheck(ops_.csr_sum_into.default, (*square, table[:, :5], table[:, 5:]))
    index = torch.randperm(x.shape[0])
    indexed = (*args, x, table[:, :5], table[:, 5:], index)
    torch.library.opcheck(ops_.csr_sum_into.default, indexed)
    torch.library.opcheck(ops_.csr_sum_into.default, (*indexed, True))
    torch.library.opcheck(ops_.csr_transpose.default, (*args, adjacency.num_cols))
    relu_input = torch.randn(adjacency.num_rows, 5)
    torch.library.opcheck(ops_.input_gradient.default, (*square[:3], x, x[:7], relu_input))
    torch.library.opcheck(ops_.input_gradient.default, (*square[:3], x, None, None, False))
    out = torch.randn(30, 7)
    torch.library.opcheck(ops_.bias_relu_.default, (out, torch.randn(7)))
    torch.library.opcheck(ops_.bias_relu_.default, (out, None))
    torch.library.opcheck(ops_.relu_backward_sum.default, (torch.randn(30, 7), out.relu()))
