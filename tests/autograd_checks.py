"""Comparing a computation with a reference one: outputs and gradients."""

import torch


def assert_same_outputs_and_grads(run, reference, inputs, atol: float, grad_atol: float) -> None:
    """``run()`` and ``reference()`` give the same output (within ``atol``) and the same
    gradients of its ``square().sum()`` with respect to each of ``inputs`` (within
    ``grad_atol``)."""
    results = []
    for compute in (reference, run):
        out = compute()
        grads = torch.autograd.grad(out.square().sum(), inputs)
        results.append((out, grads))
    (expected, expected_grads), (got, grads) = results
    assert got.shape == expected.shape
    assert torch.allclose(got, expected, atol=atol)
    for grad, expected_grad in zip(grads, expected_grads, strict=True):
        assert torch.allclose(grad, expected_grad, atol=grad_atol)
