"""The precision a training step computes in: float32, or bfloat16 under ``torch.autocast``."""

from __future__ import annotations

import contextlib

import torch


def step_precision(precision: str, device: torch.device) -> contextlib.AbstractContextManager:
    """The context a training step runs in on ``device``: ``'fp32'`` changes nothing;
    ``'bf16'`` autocasts matrix products and GraphSAGE's fused layers to bfloat16, while the
    loss, the weights, their gradients and Adam's state stay float32."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16")
