"""The fused layers' dense product (graphengine/nn/dense.py) against float64 products, on
oneDNN's inner product and on torch's own ops."""

import contextlib

import pytest
import torch

from graphengine import ops
from graphengine.nn import dense
from graphengine.nn.dense import linear, linear_layer, uses_onednn, weight_gradient
from graphengine.ops.backend import uses_kernel
from tests.helpers.autograd_checks import assert_same_outputs_and_grads


@contextlib.contextmanager
def ops_backend(backend: str):
    previous = ops.set_backend(backend)
    try:
        yield
    finally:
        ops.set_backend(previous)


def reference(x, weight, bias, relu):
    out = x.double() @ weight.double().t()
    if bias is not None:
        out = out + bias.double()
    return out.relu() if relu else out


@pytest.mark.parametrize("backend", ["auto", "torch"])
@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
def test_linear_equals_the_float64_product(backend, relu, with_bias, dtype):
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(300, 24, generator=generator).to(dtype)
    weight = torch.randn(16, 24, generator=generator).to(dtype)
    bias = torch.randn(16, generator=generator).to(dtype) if with_bias else None
    with ops_backend(backend):
        got = linear(x, weight, bias, relu)
    assert got.dtype == dtype and got.shape == (300, 16)
    tolerance = 1e-5 if dtype == torch.float32 else 5e-2  # bfloat16: the output's rounding
    expected = reference(x, weight, bias, relu)
    torch.testing.assert_close(got.double(), expected, rtol=tolerance, atol=tolerance)


def test_linear_takes_strided_operands_and_empty_batches():
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(50, 40, generator=generator)[:, ::2]  # rows 40 apart, columns 1 apart
    weight = torch.randn(20, 7, generator=generator).t()  # [7, 20] with strides (1, 7)
    torch.testing.assert_close(
        linear(x, weight, None).double(), reference(x, weight, None, False), rtol=1e-5, atol=1e-5
    )
    empty = linear(torch.randn(0, 20), weight, torch.randn(7), relu=True)
    assert empty.shape == (0, 7)


@pytest.mark.parametrize("backend", ["auto", "torch"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
def test_relu_keeps_nan_as_torch_does(backend, dtype):
    """oneDNN's own fused ReLU turns NaN into 0; a diverged model must stay visible."""
    x = torch.tensor([[float("nan")], [-2.0]], dtype=dtype)
    weight = torch.tensor([[1.0], [-1.0]], dtype=dtype)
    with ops_backend(backend):
        out = linear(x, weight, torch.zeros(2, dtype=dtype), True)
    assert out[0].isnan().all()
    assert torch.equal(out[1], torch.tensor([0.0, 2.0], dtype=dtype))


def test_onednn_runs_only_where_it_was_checked():
    x = torch.randn(4, 3)
    if not torch.backends.mkldnn.is_available():
        pytest.skip("this torch has no oneDNN")
    assert uses_onednn(x)
    assert not uses_onednn(x.double())
    # bfloat16 where oneDNN has kernels for this CPU (else torch's own product runs)
    assert uses_onednn(x.bfloat16()) == torch.ops.mkldnn._is_mkldnn_bf16_supported()
    with ops_backend("torch"):
        assert not uses_onednn(x)
    with torch.backends.mkldnn.flags(enabled=False):
        assert not uses_onednn(x)


def test_repeated_products_are_bitwise_equal():
    generator = torch.Generator().manual_seed(2)
    x = torch.randn(5000, 64, generator=generator)
    weight, bias = torch.randn(48, 64, generator=generator), torch.randn(48, generator=generator)
    assert torch.equal(linear(x, weight, bias, relu=True), linear(x, weight, bias, relu=True))


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("with_bias", [False, True])
def test_linear_layer_outputs_and_gradients_equal_torchs_linear(with_bias, relu):
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(400, 24, generator=generator, requires_grad=True)
    weight = torch.randn(16, 24, generator=generator, requires_grad=True)
    bias = torch.randn(16, generator=generator, requires_grad=True) if with_bias else None
    params = [x, weight] + ([bias] if with_bias else [])
    if torch.backends.mkldnn.is_available():
        assert "OneDnnLinear" in type(linear_layer(x, weight, bias, relu).grad_fn).__name__
    reference_bias = bias.double() if with_bias else None

    def reference():
        out = torch.nn.functional.linear(x.double(), weight.double(), reference_bias)
        return out.relu() if relu else out

    assert_same_outputs_and_grads(lambda: linear_layer(x, weight, bias, relu), reference, params)


def test_linear_layer_follows_autocast():
    x, weight = torch.randn(30, 8), torch.randn(4, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert linear_layer(x, weight).dtype == torch.bfloat16


def test_linear_layer_takes_expanded_and_transposed_gradients():
    generator = torch.Generator().manual_seed(4)
    x = torch.randn(50, 8, generator=generator, requires_grad=True)
    weight = torch.randn(4, 8, generator=generator, requires_grad=True)
    for grad in (torch.ones(1, 4).expand(50, 4), torch.randn(4, 50, generator=generator).t()):
        got = torch.autograd.grad(linear_layer(x, weight), (x, weight), grad)
        expected = torch.autograd.grad(torch.nn.functional.linear(x, weight), (x, weight), grad)
        for a, b in zip(got, expected, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


needs_kernels = pytest.mark.skipif(
    not uses_kernel(torch.zeros(1)), reason="the extension's CPU kernels are not built"
)


@needs_kernels
@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.bfloat16, torch.float16], ids=["float32", "bfloat16", "half"]
)
def test_transpose_into_equals_torchs_transpose(dtype):
    """Rows not a multiple of the kernel's 16, columns not of its 8, rows strided."""
    generator = torch.Generator().manual_seed(5)
    for rows, channels in ((1000, 203), (37, 8), (16, 16), (1, 5), (300, 1)):
        table = torch.randn(rows, channels + 3, generator=generator).to(dtype)
        src = table[:, 2 : 2 + channels]
        out = torch.full((channels, rows), 7.0, dtype=dtype)
        torch.ops.graphengine.transpose_into(src, out)
        assert torch.equal(out, src.t())
    torch.ops.graphengine.transpose_into(torch.empty(0, 4), torch.empty(4, 0))


@needs_kernels
def test_transpose_into_rejects_bad_arguments():
    src = torch.randn(6, 4)
    transpose = torch.ops.graphengine.transpose_into
    with pytest.raises(RuntimeError, match=r"'out' must be a contiguous Float \[4, 6\]"):
        transpose(src, torch.empty(6, 4))
    with pytest.raises(RuntimeError, match="'out' must be"):
        transpose(src, torch.empty(4, 6, dtype=torch.float64))
    with pytest.raises(RuntimeError, match="not contiguous"):
        transpose(src, torch.empty(6, 4).t())
    with pytest.raises(RuntimeError, match=r"'src' must be .* contiguous rows"):
        transpose(src.t(), torch.empty(6, 4))
    with pytest.raises(RuntimeError, match="'src' must be"):
        transpose(src.double(), torch.empty(4, 6, dtype=torch.float64))
    torch.library.opcheck(torch.ops.graphengine.transpose_into.default, (src, torch.empty(4, 6)))


@pytest.mark.parametrize("block_rows", [None, 64], ids=["default-blocks", "64-row-blocks"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
def test_weight_gradient_equals_the_float64_product(block_rows, dtype, monkeypatch):
    """Rows past several blocks with a partial last one, a strided ``x``, and fewer rows
    than a block (torch's mm)."""
    if block_rows is not None:
        monkeypatch.setattr(dense, "BLOCK_ROWS", block_rows)
        monkeypatch.setattr(dense, "BLOCKED_FROM_ROWS", 2 * block_rows)
    generator = torch.Generator().manual_seed(6)
    start = dense.BLOCKED_FROM_ROWS
    for rows in (start + dense.BLOCK_ROWS + 37, start, start - 1, 0):
        x = torch.randn(rows, 45, generator=generator).to(dtype)[:, 3:40]
        grad = torch.randn(rows, 19, generator=generator).to(dtype)
        got = weight_gradient(grad, x)
        expected = grad.double().t() @ x.double()
        assert got.dtype == dtype and got.shape == (19, 37)
        blocked = dtype == torch.float32 and rows >= start and uses_kernel(x)
        assert got.is_contiguous() != (blocked and uses_onednn(x))  # blocks: a transposed view
        scale = max(1.0, rows**0.5)  # a sum of `rows` products of about 1 each
        tolerance = (1e-5 if dtype == torch.float32 else 2e-2) * scale
        torch.testing.assert_close(got.double(), expected, rtol=tolerance, atol=tolerance)


def test_weight_gradient_is_bitwise_repeatable(monkeypatch):
    monkeypatch.setattr(dense, "BLOCK_ROWS", 256)
    monkeypatch.setattr(dense, "BLOCKED_FROM_ROWS", 256)
    generator = torch.Generator().manual_seed(7)
    x, grad = torch.randn(3000, 40, generator=generator), torch.randn(3000, 24, generator=generator)
    assert torch.equal(weight_gradient(grad, x), weight_gradient(grad, x))


def test_linear_layer_weight_gradient_in_blocks_equals_torchs(monkeypatch):
    monkeypatch.setattr(dense, "BLOCK_ROWS", 128)
    monkeypatch.setattr(dense, "BLOCKED_FROM_ROWS", 128)
    generator = torch.Generator().manual_seed(8)
    x = torch.randn(1000, 24, generator=generator, requires_grad=True)
    weight = torch.randn(16, 24, generator=generator, requires_grad=True)
    bias = torch.randn(16, generator=generator, requires_grad=True)

    def reference():
        return torch.nn.functional.linear(x.double(), weight.double(), bias.double()).relu()

    assert_same_outputs_and_grads(
        lambda: linear_layer(x, weight, bias, True), reference, [x, weight, bias]
    )
