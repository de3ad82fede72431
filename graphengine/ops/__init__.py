"""The graphengine C++/CUDA extension (``csrc/``): building, loading, and row gathers.

The extension registers ``torch.ops.graphengine.gather_rows`` and
``torch.ops.graphengine.cached_gather`` with a CPU and, when the installed torch has
CUDA, a CUDA implementation. It is compiled on first use against whatever torch is
installed (``torch.utils.cpp_extension.load`` with ninja; the build is cached under
``$TORCH_EXTENSIONS_DIR``, by default ``~/.cache/torch_extensions``). Where it cannot be
built, :func:`gather_rows` falls back to ``torch.index_select`` with one warning.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import warnings
from pathlib import Path

import torch

log = logging.getLogger(__name__)

CSRC = Path(__file__).resolve().parents[2] / "csrc"
_NAME = "graphengine_ops"
_lock = threading.Lock()
_state: dict[str, object] = {}


def build_extension(verbose: bool = False) -> bool:
    """Compile (or load the cached build of) the extension; ``True`` when its ops are usable.

    Raises nothing: a failed build is logged, warned about once, and reported as ``False``.
    """
    with _lock:
        if "available" in _state:
            return bool(_state["available"])
        try:
            _compile(verbose)
            _state["available"] = True
        except Exception as error:  # any compiler or loader failure means: use the fallback
            _state["available"] = False
            _state["error"] = error
            warnings.warn(
                f"graphengine's C++ extension could not be built ({type(error).__name__}: "
                f"{str(error).strip().splitlines()[-1] if str(error).strip() else ''}); "
                "gathers fall back to torch.index_select",
                RuntimeWarning,
                stacklevel=2,
            )
        return bool(_state["available"])


def build_error() -> BaseException | None:
    """Why the last :func:`build_extension` failed, or ``None``."""
    return _state.get("error")


def with_cuda() -> bool:
    """Whether the extension is built with its CUDA kernels (needs a CUDA build of torch)."""
    from torch.utils.cpp_extension import CUDA_HOME

    return torch.version.cuda is not None and CUDA_HOME is not None


def _compile(verbose: bool) -> None:
    from torch.utils.cpp_extension import load

    sources = [
        CSRC / "gather.cpp",
        CSRC / "cpu" / "gather_kernel.cpp",
        CSRC / "cpu" / "buffer_pool.cpp",
    ]
    if not all(path.is_file() for path in sources):
        raise FileNotFoundError(f"extension sources not found under '{CSRC}'")
    flags = ["-O3", "-fopenmp"]
    if with_cuda():
        sources.append(CSRC / "cuda" / "gather_kernel.cu")
    # One build per checkout: two checkouts sharing a name would rebuild over each other.
    checkout = hashlib.sha1(str(CSRC).encode()).hexdigest()[:8]
    load(
        name=f"{_NAME}_{'cuda' if with_cuda() else 'cpu'}_{checkout}",
        sources=[str(path) for path in sources],
        extra_cflags=flags,
        extra_cuda_cflags=["-O3", "--use_fast_math"],
        extra_ldflags=["-fopenmp"],
        is_python_module=False,
        verbose=verbose,
    )
    _register_fakes()


def _register_fakes() -> None:
    """Shape functions so that the ops trace under ``torch.compile``."""

    def fake_gather(src, index, out=None):
        return out if out is not None else src.new_empty((index.shape[0], src.shape[1]))

    def fake_cached(src, index, cache, slot_of, out=None):
        return fake_gather(src, index, out)

    torch.library.register_fake("graphengine::gather_rows", fake_gather)
    torch.library.register_fake("graphengine::cached_gather", fake_cached)


def gather_rows(src: torch.Tensor, index: torch.Tensor, out: torch.Tensor | None = None):
    """``out[i] = src[index[i]]`` for a 2-D ``src`` of any dtype.

    Args:
        src: ``[num_rows, num_cols]``, rows contiguous (a memory-mapped table works).
        index: int32 or int64 ``[n]``.
        out: optional ``[n, num_cols]`` buffer of ``src``'s dtype (e.g. pinned, reused).

    Returns ``out`` or a new ``[n, num_cols]`` tensor. Raises ``IndexError`` naming the
    first id outside ``[0, num_rows)``; nothing is written past ``out``.
    """
    if build_extension():
        return torch.ops.graphengine.gather_rows(src, index, out)
    return _index_select(src, index, out)


def cached_gather(src, index, cache, slot_of, out=None):
    """Like :func:`gather_rows`, but rows whose ``slot_of[id] >= 0`` come from ``cache``.

    ``cache`` is ``[slots, num_cols]`` of ``src``'s dtype and ``slot_of`` int32
    ``[num_rows]``. On CUDA, ``src`` is pinned host memory read by zero-copy.
    """
    if build_extension():
        return torch.ops.graphengine.cached_gather(src, index, cache, slot_of, out)
    slots = slot_of[index.long()]
    result = _index_select(src, index, out)
    hit = slots >= 0
    result[hit] = cache[slots[hit].long()]
    return result


def _index_select(src, index, out):
    if src.dim() != 2:
        raise ValueError(f"gather_rows: 'src' must be 2-D (got {src.dim()}-D)")
    if index.numel():
        low, high = int(index.min()), int(index.max())
        if low < 0 or high >= src.shape[0]:
            bad = low if low < 0 else high
            raise IndexError(f"gather_rows: 'index' holds id {bad}, outside [0, {src.shape[0]})")
    return torch.index_select(src, 0, index.long(), out=out)
