"""Page-locking existing host memory in place (``cudaHostRegister``), and undoing it.

A registration lasts exactly as long as the tensor it was made for: :func:`pin` attaches a
``weakref.finalize`` to that tensor, which calls ``cudaHostUnregister`` when the tensor is
garbage-collected or when :func:`unpin` runs it early (a store dropping a table), and at
interpreter exit. The finalizer holds the tensor's storage, so the memory stays mapped
until it is unregistered. Pinning the same memory twice is a no-op.
"""

from __future__ import annotations

import os
import weakref

import torch

HOST_REGISTER_DEFAULT = 0
HOST_REGISTER_READ_ONLY = 8  # cudaHostRegisterReadOnly

# start address -> (bytes, the finalizer that unregisters them); only what this module
# registered.
_registered: dict[int, tuple[int, weakref.finalize]] = {}


def cudart():
    """The CUDA runtime bindings (``torch.cuda.cudart()``); tests replace this function."""
    if not torch.cuda.is_available():
        raise RuntimeError("pinning needs CUDA, and torch.cuda.is_available() is False")
    return torch.cuda.cudart()


def pin(tensor: torch.Tensor, read_only: bool = False, what: str = "tensor") -> torch.Tensor:
    """Register ``tensor``'s memory with ``cudaHostRegister``; returns the tensor registered.

    Args:
        tensor: a CPU tensor of any shape and dtype; a non-contiguous one is copied first
            (the copy is returned and must be kept: its registration ends with it).
        read_only: register with ``cudaHostRegisterReadOnly`` (needed for read-only memory
            maps).
        what: how error messages name the tensor (e.g. ``"table 'x'"``).

    Memory already registered here (a range that covers it), or allocated pinned by torch,
    is returned unchanged.

    Raises:
        ValueError: ``tensor`` is not on the CPU, or part of its memory (not all) is
            registered already (e.g. a slice of it was pinned first).
        RuntimeError: CUDA is missing, or ``cudaHostRegister`` failed.
    """
    if tensor.device.type != "cpu":
        raise ValueError(f"'tensor' must be on the CPU to pin it (got device {tensor.device})")
    tensor = tensor.contiguous()
    pointer = tensor.data_ptr()
    size = tensor.numel() * tensor.element_size()
    if size == 0 or _coverage(pointer, size) == "all":
        return tensor
    if _coverage(pointer, size) == "part":
        raise ValueError(
            f"part of {what}'s memory is registered already (a slice of it was pinned); "
            "pin the whole tensor first, or unpin the slice"
        )
    runtime = cudart()
    if tensor.is_pinned():
        return tensor
    flags = HOST_REGISTER_READ_ONLY if read_only else HOST_REGISTER_DEFAULT
    code = int(runtime.cudaHostRegister(pointer, size, flags))
    if code != 0:
        raise RuntimeError(f"cudaHostRegister failed for {what} (error {code})")
    storage = tensor.untyped_storage()
    finalizer = weakref.finalize(tensor, _unregister, runtime, pointer, os.getpid(), storage)
    _registered[pointer] = (size, finalizer)
    return tensor


def unpin(tensor: torch.Tensor) -> bool:
    """Unregister ``tensor``'s memory now if :func:`pin` registered it; returns whether it did."""
    entry = _registered.get(tensor.data_ptr())
    if entry is None:
        return False
    return entry[1]() is True


def is_registered(tensor: torch.Tensor) -> bool:
    """Whether all of ``tensor``'s memory lies in a range :func:`pin` registered that is not
    unregistered yet."""
    return _coverage(tensor.data_ptr(), tensor.numel() * tensor.element_size()) == "all"


def _coverage(pointer: int, size: int) -> str | None:
    """``"all"`` when one live registration covers ``[pointer, pointer + size)``, ``"part"``
    when registrations overlap it only in part, else ``None``."""
    overlap = False
    for start, (length, finalizer) in list(_registered.items()):
        if not finalizer.alive or start >= pointer + size or start + length <= pointer:
            continue
        if start <= pointer and pointer + size <= start + length:
            return "all"
        overlap = True
    return "part" if overlap else None


def _unregister(runtime, pointer: int, pid: int, _storage) -> bool:
    """The finalizer: unregister ``pointer`` (its storage is kept alive until this returns).

    Only in the process that registered it: a forked child inherits the finalizer but not
    the CUDA context, and must not call the runtime."""
    _registered.pop(pointer, None)
    if os.getpid() != pid:
        return False
    return int(runtime.cudaHostUnregister(pointer)) == 0
