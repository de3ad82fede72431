"""Zero-copy views between NumPy arrays (memory maps included) and torch tensors."""

from __future__ import annotations

import warnings

import numpy as np
import torch


def as_tensor(value) -> torch.Tensor:
    """A torch view of a tensor or numpy array (read-only memmaps included), without a copy."""
    if isinstance(value, torch.Tensor):
        return value
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*not writable.*")
        return torch.from_numpy(np.asarray(value))
