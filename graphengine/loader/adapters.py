"""Small conversions every loader shares: tensors, arrays and lists as NumPy arrays, PyG's
``input_id`` checked, rows of an attribute selected."""

from __future__ import annotations

import numpy as np
import torch


def as_numpy(value) -> np.ndarray:
    """A tensor (moved to the CPU), array or list as a NumPy array."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    return np.asarray(value)


def check_input_ids(input_id, num_seeds: int) -> np.ndarray:
    """PyG's ``input_id`` (one int per seed) as int64 ``[num_seeds]``."""
    ids = as_numpy(input_id)
    if ids.shape != (num_seeds,) or (ids.size and not np.issubdtype(ids.dtype, np.integer)):
        raise ValueError(
            f"'input_id' must hold one integer per seed, shape ({num_seeds},) "
            f"(got {ids.dtype} of shape {ids.shape})"
        )
    return ids.astype(np.int64)


def select_rows(value, dim: int, index: torch.Tensor):
    """``value`` indexed by ``index`` (int64) along ``dim``: tensors, arrays and lists; any
    other value as it is."""
    if isinstance(value, torch.Tensor):
        return value.index_select(dim, index.to(value.device))
    if isinstance(value, np.ndarray):
        return np.take(value, index.numpy(), axis=dim)
    if isinstance(value, list):
        return [value[i] for i in index.tolist()]
    return value
