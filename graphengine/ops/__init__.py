"""Row gathers through the graphengine C++/CUDA extension (``csrc/``), or a torch fallback.

The extension registers ``torch.ops.graphengine.gather_rows`` and
``torch.ops.graphengine.cached_gather`` with a CPU and, when the installed torch has CUDA, a
CUDA implementation; :mod:`graphengine.ops.build` compiles it on first use. Which
implementation a gather uses is its *backend*:

- ``"auto"`` (the default): the extension when it builds, else ``torch.index_select`` with
  one ``RuntimeWarning``;
- ``"csrc"``: the extension, or :class:`ExtensionUnavailableError` (an ``ImportError``) with
  the build error and what to do;
- ``"torch"``: ``torch.index_select``, without building anything.

Pick it per call (``backend=``) or for the process (:func:`set_backend`, or the
``GRAPHENGINE_OPS_BACKEND`` environment variable, read at the first gather).
"""

from __future__ import annotations

import os
import threading
import warnings

import torch

from graphengine.ops.build import (
    INSTALL_HINT,
    build_error,
    build_extension,
    library_path,
    sources_dir,
    with_cuda,
)

__all__ = [
    "BACKENDS",
    "ExtensionUnavailableError",
    "build_error",
    "build_extension",
    "cached_gather",
    "check_index",
    "gather_rows",
    "get_backend",
    "library_path",
    "prefetch_rows",
    "set_backend",
    "set_intraop_threads",
    "sources_dir",
    "with_cuda",
]

BACKENDS = ("auto", "csrc", "torch")
_warned_lock = threading.Lock()
_warned: list[bool] = []


class ExtensionUnavailableError(ImportError):
    """``backend='csrc'`` was asked for, and the extension did not build."""


BACKEND_ENV = "GRAPHENGINE_OPS_BACKEND"


def _checked_backend(backend: object, name: str = "'backend'") -> str:
    if backend not in BACKENDS:
        raise ValueError(f"{name} must be one of {BACKENDS} (got {backend!r})")
    return str(backend)


_backend: str | None = None  # None: not chosen yet, $GRAPHENGINE_OPS_BACKEND or "auto"


def set_backend(backend: str) -> str:
    """Make ``backend`` (``"auto"``, ``"csrc"`` or ``"torch"``) the process-wide default of
    gathers called without ``backend=``; returns the previous default."""
    global _backend
    previous, _backend = get_backend(), _checked_backend(backend)
    return previous


def get_backend() -> str:
    """The process-wide default backend: what :func:`set_backend` chose, else
    ``$GRAPHENGINE_OPS_BACKEND``, else ``"auto"``."""
    if _backend is not None:
        return _backend
    return _checked_backend(os.environ.get(BACKEND_ENV, "auto"), f"${BACKEND_ENV}")


def _use_extension(backend: str | None) -> bool:
    """Whether a gather with this ``backend=`` runs the extension; raises or warns per the
    module's docstring."""
    backend = get_backend() if backend is None else _checked_backend(backend)
    if backend == "torch":
        return False
    if build_extension():
        return True
    error = build_error()
    summary = f"{type(error).__name__}: {_last_line(error)}" if error else "unknown error"
    if backend == "csrc":
        raise ExtensionUnavailableError(
            f"backend='csrc': graphengine's C++ extension is not available ({summary}); "
            + INSTALL_HINT
        ) from error
    with _warned_lock:
        if not _warned:
            _warned.append(True)
            warnings.warn(
                f"graphengine's C++ extension could not be built ({summary}); gathers fall back "
                "to torch.index_select",
                RuntimeWarning,
                stacklevel=3,
            )
    return False


def _last_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[-1] if text else ""


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
    if _use_extension(backend):
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
    if _use_extension(backend):
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


def set_intraop_threads(num_threads: int) -> bool:
    """Give the calling thread ``num_threads`` of torch's intra-op threads (its CPU gathers and
    other parallel torch ops), leaving every other thread's count and the process-wide
    default alone, unlike ``torch.set_num_threads``. Returns ``False`` where that cannot be
    done (no extension, or torch without OpenMP): the thread then keeps torch's count.

    Raises ``ValueError`` unless ``num_threads`` is an int >= 1.
    """
    if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1:
        raise ValueError(f"'num_threads' must be an int >= 1 (got {num_threads!r})")
    if not build_extension():
        return False
    return bool(torch.ops.graphengine.set_intraop_threads(num_threads))


def prefetch_rows(
    src: torch.Tensor, index: torch.Tensor, slot_of: torch.Tensor | None = None
) -> int:
    """Ask the kernel to read rows ``index`` of a memory-mapped CPU ``src`` ``[num_rows,
    num_cols]`` from disk now, asynchronously (``madvise(MADV_WILLNEED)`` on the pages they
    cover, adjacent rows merged), so that a gather that follows finds them in the page cache
    instead of waiting for one read per fault. Rows with ``slot_of[id] >= 0`` (cached
    elsewhere) and ids out of range are skipped. A hint: returns how many ranges were advised,
    0 where nothing is advised (no extension or the ``"torch"`` backend, or ``src`` or
    ``index`` not on the CPU). ``index`` int32 or int64 ``[n]``."""
    on_cpu = src.device.type == "cpu" and index.device.type == "cpu"
    if not on_cpu or get_backend() == "torch" or not build_extension():
        return 0
    return int(torch.ops.graphengine.prefetch_rows(src, index.contiguous(), slot_of))


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
