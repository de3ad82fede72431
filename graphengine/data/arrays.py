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


def memmap_source(array) -> tuple | None:
    """How to reopen a C-contiguous memory-mapped array from its file, or ``None``.

    Returns ``(filename, dtype, shape, offset, mode)`` for :func:`open_memmap_source`, with
    ``offset`` the byte offset of ``array``'s first element in the file (slices of a memory
    map included); ``None`` for an array that is not a view of an ``np.memmap`` with a file
    name, not C-contiguous, or copy-on-write (mode ``'c'``: its values are not the file's).
    """
    if not isinstance(array, np.memmap) or not array.flags.c_contiguous:
        return None
    root = array
    while isinstance(root.base, np.memmap):
        root = root.base
    if getattr(root, "filename", None) is None or root.base is None or root.mode == "c":
        return None
    offset = int(root.offset) + (array.ctypes.data - root.ctypes.data)
    mode = "r" if root.mode == "r" else "r+"
    return (str(root.filename), array.dtype.str, tuple(array.shape), offset, mode)


def open_memmap_source(source: tuple) -> np.memmap:
    """Reopen what :func:`memmap_source` described (zero-length arrays as plain arrays)."""
    filename, dtype, shape, offset, mode = source
    if 0 in shape:
        return np.empty(shape, dtype=dtype)
    return np.memmap(filename, dtype=dtype, mode=mode, offset=offset, shape=shape)
