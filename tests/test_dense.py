"""The fused layers' dense product (graphengine/nn/dense.py) against float64 products, on
oneDNN's inner product and on torch's own ops."""

import contextlib

import pytest
import torch

from graphengine import ops
from graphengine.nn.dense import linear, linear_layer, uses_onednn
from tests.autograd_checks import assert_same_outputs_and_grads


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
