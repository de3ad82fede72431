"""Comparing a computation with a reference one: outputs and gradients."""

import torch


def assert_close_at_scale(got: torch.Tensor, expected: torch.Tensor, rtol: float) -> None:
    """Every entry of ``got`` is within ``rtol`` times the largest magnitude in ``expected``.

    float32 sums over many edges round at the scale of their largest terms, so an entry-wise
    tolerance either fails on large entries (absolute) or on small ones (relative)."""
    assert got.shape == expected.shape
    got, expected = got.detach(), expected.detach()
    error = float((got - expected).abs().max()) if got.numel() else 0.0
    scale = float(expected.abs().max()) if expected.numel() else 0.0
    assert error <= rtol * scale, f"largest error {error:.3g} exceeds {rtol:g} x {scale:.3g}"


def assert_same_outputs_and_grads(
    run, reference, inputs, rtol: float = 1e-5, grad_rtol: float = 1e-4
) -> None:
    """``run()`` and ``reference()`` give the same output and the same gradients of its
    ``square().sum()`` with respect to each of ``inputs``, within ``rtol`` and ``grad_rtol``
    of each tensor's largest magnitude (float32 rounding is a few 1e-7 of it)."""
    results = []
    for compute in (reference, run):
        out = compute()
        grads = torch.autograd.grad(out.square().sum(), inputs)
        results.append((out, grads))
    (expected, expected_grads), (got, grads) = results
    assert_close_at_scale(got, expected, rtol)
    for grad, expected_grad in zip(grads, expected_grads, strict=True):
        assert_close_at_scale(grad, expected_grad, grad_rtol)
