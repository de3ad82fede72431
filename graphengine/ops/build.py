"""Building and loading the C++/CUDA extension whose sources ship as ``graphengine._csrc``.

The sources are the checkout's top-level ``csrc/``, laid out as pyg-lib's: per op (or op
family) a schema file ``csrc/<op>.cpp`` that declares the op with ``TORCH_LIBRARY_FRAGMENT``,
its CPU kernel ``csrc/cpu/<op>_kernel.cpp`` and, where it has one, its CUDA kernel
``csrc/cuda/<op>_kernel.cu``, each registering itself with ``TORCH_LIBRARY_IMPL``. The build
takes every source it finds (:func:`extension_sources`), and each op's fake kernel is declared
beside its Python wrapper (:func:`fake_kernel`).

A wheel or ``pip install .`` ships the sources as package data of ``graphengine._csrc`` (see
``pyproject.toml``), and an editable install finds them in the checkout. They are compiled on
first use against whatever torch is installed (``torch.utils.cpp_extension.load`` with ninja;
the build is cached under ``$TORCH_EXTENSIONS_DIR``, by default ``~/.cache/torch_extensions``).
"""

from __future__ import annotations

import hashlib
import importlib.resources
import logging
import threading
from collections.abc import Callable
from pathlib import Path

import torch

log = logging.getLogger(__name__)

_NAME = "graphengine_ops"
_CHECKOUT_CSRC = Path(__file__).resolve().parents[2] / "csrc"
#: What to do when the extension cannot be built or loaded: the text errors and warnings end with.
INSTALL_HINT = (
    "run `graphengine build --verbose` to see the compiler's output; building needs a C++ "
    "compiler, ninja (pip install ninja) and the package's C++ sources (reinstall graphengine "
    "if they are missing), or pick backend='torch' for the torch.index_select fallback"
)
_lock = threading.Lock()
_state: dict[str, object] = {}
_fake_kernels: dict[str, Callable] = {}  # op name -> fake kernel, from fake_kernel
_fakes_registered: set[str] = set()


def sources_dir() -> Path | None:
    """The folder holding ``gather.cpp``: the installed ``graphengine._csrc`` package data,
    else the checkout's ``csrc/``; ``None`` when neither has the sources."""
    try:
        candidate = importlib.resources.files("graphengine._csrc") / "gather.cpp"
    except (ModuleNotFoundError, TypeError):
        candidate = None
    if isinstance(candidate, Path) and candidate.is_file():
        return candidate.parent
    if (_CHECKOUT_CSRC / "gather.cpp").is_file():
        return _CHECKOUT_CSRC
    return None


def with_cuda() -> bool:
    """Whether the extension is built with its CUDA kernels (needs a CUDA build of torch)."""
    from torch.utils.cpp_extension import CUDA_HOME

    return torch.version.cuda is not None and CUDA_HOME is not None


def build_extension(verbose: bool = False) -> bool:
    """Compile (or load the cached build of) the extension; ``True`` when its ops are usable.

    Raises nothing: a failure is logged, kept for :func:`build_error`, and reported as
    ``False``. The outcome is cached for the process.
    """
    if "available" in _state:  # decided: no lock on the gather's hot path
        return bool(_state["available"])
    with _lock:
        if "available" in _state:
            return bool(_state["available"])
        try:
            _state["library"] = _compile(verbose)
            _state["available"] = True
        except Exception as error:  # any compiler or loader failure means: no extension
            log.debug("the extension did not build", exc_info=True)
            _state["available"] = False
            _state["error"] = error
        return bool(_state["available"])


def build_error() -> BaseException | None:
    """Why the last :func:`build_extension` failed, or ``None``."""
    error = _state.get("error")
    return error if isinstance(error, BaseException) else None


def library_path() -> str | None:
    """The path of the loaded extension library, or ``None`` when it is not built."""
    library = _state.get("library")
    return str(library) if library else None


def extension_sources(csrc: Path, cuda: bool) -> list[Path]:
    """The extension's sources under ``csrc``: every ``.cpp`` file (op schemas at the top, CPU
    kernels in ``cpu/``), and with ``cuda`` every ``.cu`` file (``cuda/``), sorted. Each file
    registers its schemas or kernels itself, so a new op is new files and nothing here.

    Raises ``ValueError`` where two sources share a file name: torch's build names each
    object file after its source's name alone, so one would overwrite the other.
    """
    patterns = ("*.cpp", "*.cu") if cuda else ("*.cpp",)
    sources = sorted(path for pattern in patterns for path in csrc.rglob(pattern))
    by_name: dict[str, list[str]] = {}
    for path in sources:
        by_name.setdefault(path.name, []).append(str(path.relative_to(csrc)))
    clashes = [paths for paths in by_name.values() if len(paths) > 1]
    if clashes:
        raise ValueError(f"the extension's sources must have distinct file names (got {clashes})")
    return sources


def fake_kernel(op_name: str) -> Callable[[Callable], Callable]:
    """Decorator: the decorated function becomes the fake kernel (the shape function that
    ``torch.compile`` and ``FakeTensorMode`` trace with) of ``torch.ops.graphengine.<op_name>``,
    registered with ``torch.library.register_fake`` as soon as the extension is loaded (the op
    must exist first). Each op's module declares its own, beside its Python wrapper."""

    def declare(func: Callable) -> Callable:
        _fake_kernels[op_name] = func
        if _state.get("available"):  # declared after the build: register it now
            with _lock:
                _register_fakes()
        return func

    return declare


def _compile(verbose: bool) -> str | None:
    from torch.utils.cpp_extension import load

    csrc = sources_dir()
    if csrc is None:
        raise FileNotFoundError(
            f"the extension's sources (gather.cpp) are neither in the installed package "
            f"graphengine._csrc nor at '{_CHECKOUT_CSRC}'"
        )
    sources = extension_sources(csrc, with_cuda())
    # One build per source folder: two checkouts sharing a name would rebuild over each other.
    folder = hashlib.sha1(str(csrc).encode()).hexdigest()[:8]
    library = load(
        name=f"{_NAME}_{'cuda' if with_cuda() else 'cpu'}_{folder}",
        sources=[str(path) for path in sources],
        extra_cflags=["-O3", "-fopenmp"],
        extra_cuda_cflags=["-O3", "--use_fast_math"],
        extra_ldflags=["-fopenmp"],
        is_python_module=False,
        verbose=verbose,
    )
    _register_fakes()
    return library if isinstance(library, str) else None


def _register_fakes() -> None:
    """Register every declared :func:`fake_kernel` not registered yet (the ops exist now)."""
    for op_name, func in _fake_kernels.items():
        if op_name not in _fakes_registered:
            torch.library.register_fake(f"graphengine::{op_name}", func)
            _fakes_registered.add(op_name)
