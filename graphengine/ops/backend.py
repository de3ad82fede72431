"""The one backend decision: whether graphengine's own kernels compute, or torch's ops.

Every op and every layer that has a fast path (the extension's kernels in :mod:`graphengine.ops`
and :mod:`graphengine.nn`, oneDNN's inner product in :mod:`graphengine.nn.dense`, the host
memory cache in :mod:`graphengine.runtime`) asks this module, and nothing else, whether to take
it. The answer depends on the *backend*:

- ``"auto"`` (the default): the extension when it builds, else torch's ops (a gather warns
  once, with ``RuntimeWarning``, that it falls back to ``torch.index_select``);
- ``"csrc"``: the extension, or :class:`ExtensionUnavailableError` (an ``ImportError``) with
  the build error and what to do;
- ``"torch"``: torch's own ops everywhere, without building anything.

A gather takes it per call (``backend=``); the process-wide default is what
:func:`set_backend` chose, else the ``GRAPHENGINE_OPS_BACKEND`` environment variable (read when
first needed), else ``"auto"``.
"""

from __future__ import annotations

import os
import threading
import warnings

import torch

from graphengine.ops.build import INSTALL_HINT, build_error, build_extension, library_path

#: The values of ``GRAPHENGINE_OPS_BACKEND``: ``"csrc"`` the C++/CUDA extension, ``"torch"``
#: torch's own ops, ``"auto"`` the extension where it is built.
BACKENDS = ("auto", "csrc", "torch")
BACKEND_ENV = "GRAPHENGINE_OPS_BACKEND"
# The dtypes the extension's CPU kernels compute in (rows summed in float32).
KERNEL_DTYPES = (torch.float32, torch.bfloat16, torch.float16)

_backend: str | None = None  # None: not chosen yet, $GRAPHENGINE_OPS_BACKEND or "auto"
_warned_lock = threading.Lock()
_warned: list[bool] = []  # one entry once the fallback warning was given


class ExtensionUnavailableError(ImportError):
    """The extension was required (``backend='csrc'``, or an op without a fallback), and it
    did not build."""


def set_backend(backend: str) -> str:
    """Make ``backend`` (``"auto"``, ``"csrc"`` or ``"torch"``) the process-wide default of
    gathers called without ``backend=`` and of every other fast path; returns the previous
    default. Raises ``ValueError`` naming any other value."""
    global _backend
    previous, _backend = get_backend(), _checked_backend(backend)
    return previous


def get_backend() -> str:
    """The process-wide default backend: what :func:`set_backend` chose, else
    ``$GRAPHENGINE_OPS_BACKEND``, else ``"auto"``."""
    if _backend is not None:
        return _backend
    return _checked_backend(os.environ.get(BACKEND_ENV, "auto"), f"${BACKEND_ENV}")


def kernels_allowed() -> bool:
    """Whether the process-wide backend lets graphengine's own kernels compute (the
    extension's, oneDNN's inner product): every backend but ``"torch"``. Builds nothing."""
    return get_backend() != "torch"


def extension_usable() -> bool:
    """Whether the extension's ops run: :func:`kernels_allowed`, and the extension built
    (compiled on the first call, see :func:`graphengine.ops.build_extension`)."""
    return kernels_allowed() and build_extension()


def extension_loaded() -> bool:
    """Whether the extension is already loaded in this process (whatever the backend)."""
    return library_path() is not None


def uses_kernel(x: torch.Tensor) -> bool:
    """Whether the extension's CPU kernels compute on ``x``: a float32, bfloat16 or float16
    CPU tensor, and :func:`extension_usable`."""
    return x.device.type == "cpu" and x.dtype in KERNEL_DTYPES and extension_usable()


def use_extension(backend: str | None) -> bool:
    """Whether a gather called with ``backend=`` (``None``: :func:`get_backend`) runs the
    extension. Raises ``ValueError`` for an unknown backend and
    :class:`ExtensionUnavailableError` for ``"csrc"`` without the extension; ``"auto"``
    without it warns once per process and returns ``False``."""
    backend = get_backend() if backend is None else _checked_backend(backend)
    if backend == "torch":
        return False
    if build_extension():
        return True
    if backend == "csrc":
        require_extension("backend='csrc'")
    with _warned_lock:
        if not _warned:
            _warned.append(True)
            warnings.warn(
                f"graphengine's C++ extension could not be built ({_build_summary()}); gathers "
                "fall back to torch.index_select",
                RuntimeWarning,
                stacklevel=3,
            )
    return False


def require_extension(what: str) -> None:
    """Build the extension, or raise :class:`ExtensionUnavailableError` saying that ``what``
    needs it, why it did not build and what to do."""
    if build_extension():
        return
    raise ExtensionUnavailableError(
        f"{what}: graphengine's C++ extension is not available ({_build_summary()}); "
        + INSTALL_HINT
    ) from build_error()


def _checked_backend(backend: object, name: str = "'backend'") -> str:
    if backend not in BACKENDS:
        raise ValueError(f"{name} must be one of {BACKENDS} (got {backend!r})")
    return str(backend)


def _build_summary() -> str:
    error = build_error()
    if error is None:
        return "unknown error"
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[-1] if text else ''}"
