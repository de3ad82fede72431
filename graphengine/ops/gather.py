"""Row gathers (``gather_rows``, ``cached_gather``): the extension's kernels
(``csrc/gather.cpp``, ``csrc/cpu/gather_kernel.cpp``, ``csrc/cuda/gather_kernel.cu``) or
``torch.index_select``, as :mod:`graphengine.ops.backend` decides, and their fake kernels."""

from __future__ import annotations

import torch

from graphengine.ops.backend import use_extension
from graphengine.ops.build import fake_kernel


def gather_rows(
    src: torch.Tensor,
    index: torch.Tensor,
    out: torch.Tensor | None = None,
    *,
    backend: str | None = None,
) -> torch.Tensor:
    """``out[i] = src[index[i]]`` for a 2-D ``src`` of any dtype.

    Args:
        src: ``[num_rows, num_cols]``, rows contiguous (a memory-mapped table works); on the
            CPU, on the GPU, or pinned on the CPU for zero-copy reads by CUDA ``index``.
        index: int32 or int64 ``[n]``, contiguous.
        out: optional ``[n, num_cols]`` contiguous buffer of ``src``'s dtype on ``index``'s
            device (e.g. pinned, reused).
        backend: ``"auto"``, ``"csrc"`` or ``"torch"``; ``None``: :func:`get_backend`.

    Returns ``out`` or a new ``[n, num_cols]`` tensor of ``src``'s dtype on ``index``'s
    device. Raises ``IndexError`` naming the first id outside ``[0, num_rows)``; nothing is
    written past ``out``. CUDA ids are checked on the GPU by a device-side assertion (no host
    sync; it ends the process's CUDA context): check ids still on the host with
    :func:`check_index` first.
    """
    if use_extension(backend):
        return torch.ops.graphengine.gather_rows(src, index, out)
    return _index_select(src, index, out)


def cached_gather(
    src: torch.Tensor,
    index: torch.Tensor,
    cache: torch.Tensor,
    slot_of: torch.Tensor,
    out: torch.Tensor | None = None,
    *,
    backend: str | None = None,
) -> torch.Tensor:
    """Like :func:`gather_rows`, but rows whose ``slot_of[id] >= 0`` come from ``cache``.

    ``cache`` is ``[slots, num_cols]`` of ``src``'s dtype and ``slot_of`` int32
    ``[num_rows]``, both on ``index``'s device. On CUDA, ``src`` is pinned host memory read by
    zero-copy (the ``"torch"`` backend copies the uncached rows through the host instead).
    """
    if use_extension(backend):
        return torch.ops.graphengine.cached_gather(src, index, cache, slot_of, out)
    if cache.device != index.device or slot_of.device != index.device:
        raise ValueError(
            f"cached_gather: 'cache' and 'slot_of' must be on 'index''s device {index.device} "
            f"(got {cache.device} and {slot_of.device})"
        )
    _check_index_tensor(index)
    check_index(index, src.shape[0])
    slots = slot_of[index.long()]
    stale = slots >= cache.shape[0]
    if bool(stale.any()):
        id_ = int(index[stale.nonzero()[0, 0]])
        raise IndexError(
            f"cached_gather: 'slot_of'[{id_}] = {int(slot_of[id_])} is outside the cache's "
            f"[0, {cache.shape[0]}) slots"
        )
    result = _index_select(src, index, out)
    hit = slots >= 0
    result[hit] = cache[slots[hit].long()]
    return result


def check_index(index: torch.Tensor, num_rows: int) -> None:
    """Raise ``IndexError`` naming the first entry of ``index`` outside ``[0, num_rows)``,
    with the extension's message. Cheap on the host (a min and a max); on a GPU it syncs."""
    if not index.numel():
        return
    low, high = int(index.min()), int(index.max())
    if low >= 0 and high < num_rows:
        return
    position = int(((index < 0) | (index >= num_rows)).nonzero()[0, 0])
    raise IndexError(
        f"gather_rows: 'index' holds id {int(index[position])} at position {position}, "
        f"outside [0, {num_rows})"
    )


# Like the kernels, a gather's result is `out` when given, else a new tensor on `index`'s
# device (the CUDA kernels gather into the GPU of the ids, also from a pinned CPU `src`).
@fake_kernel("gather_rows")
def _fake_gather_rows(src, index, out=None):
    if out is not None:
        return out
    return src.new_empty((index.shape[0], src.shape[1]), device=index.device)


@fake_kernel("cached_gather")
def _fake_cached_gather(src, index, cache, slot_of, out=None):
    return _fake_gather_rows(src, index, out)


def _check_index_tensor(index: torch.Tensor) -> None:
    if not isinstance(index, torch.Tensor):
        raise TypeError(f"gather_rows: 'index' must be a tensor (got {type(index).__name__})")
    if index.dim() != 1:
        raise ValueError(f"gather_rows: 'index' must be 1-D (got {index.dim()}-D)")
    if index.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"gather_rows: 'index' must be int32 or int64 (got {index.dtype})")


def _index_select(src, index, out):
    """The ``"torch"`` backend; the result is on ``index``'s device, like the kernels'."""
    if src.dim() != 2:
        raise ValueError(f"gather_rows: 'src' must be 2-D (got {src.dim()}-D)")
    _check_index_tensor(index)
    if out is not None and out.device != index.device:
        raise ValueError(
            f"gather_rows: 'out' must be on 'index''s device {index.device} (got {out.device})"
        )
    if src.device == index.device:
        check_index(index, src.shape[0])
        return torch.index_select(src, 0, index.long(), out=out)
    if src.device.type != "cpu":
        raise ValueError(
            f"gather_rows: 'src' on {src.device} needs 'index' on the same device "
            f"(got {index.device})"
        )
    # A CPU (e.g. pinned) table and GPU ids: gather on the host, where the table is, and copy
    # only the gathered rows over; `src.to(device)` would copy the whole table.
    host_index = index.cpu()
    check_index(host_index, src.shape[0])
    rows = torch.index_select(src, 0, host_index.long())
    if out is None:
        return rows.to(index.device)
    return out.copy_(rows)
