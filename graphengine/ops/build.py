"""Building and loading the C++/CUDA extension whose sources ship as ``graphengine._csrc``.

The sources are the checkout's top-level ``csrc/``; a wheel or ``pip install .`` ships them as
package data of ``graphengine._csrc`` (see ``pyproject.toml``), and an editable install finds
them in the checkout. They are compiled on first use against whatever torch is
installed (``torch.utils.cpp_extension.load`` with ninja; the build is cached under
``$TORCH_EXTENSIONS_DIR``, by default ``~/.cache/torch_extensions``).
"""

from __future__ import annotations

import hashlib
import importlib.resources
import logging
import threading
from pathlib import Path

import torch

log = logging.getLogger(__name__)

_NAME = "graphengine_ops"
_CHECKOUT_CSRC = Path(__file__).resolve().parents[2] / "csrc"
INSTALL_HINT = (
    "run `graphengine build --verbose` to see the compiler's output; building needs a C++ "
    "compiler, ninja (pip install ninja) and the package's C++ sources (reinstall graphengine "
    "if they are missing), or pick backend='torch' for the torch.index_select fallback"
)
_lock = threading.Lock()
_state: dict[str, object] = {}


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


def _compile(verbose: bool) -> str | None:
    from torch.utils.cpp_extension import load

    csrc = sources_dir()
    if csrc is None:
        raise FileNotFoundError(
            f"the extension's sources (gather.cpp) are neither in the installed package "
            f"graphengine._csrc nor at '{_CHECKOUT_CSRC}'"
        )
    sources = [
        csrc / "gather.cpp",
        csrc / "cpu" / "gather_kernel.cpp",
        csrc / "cpu" / "buffer_pool.cpp",
        csrc / "cpu" / "host_cache.cpp",
        csrc / "cpu" / "thread_budget.cpp",
        csrc / "cpu" / "gat_kernel.cpp",
        csrc / "cpu" / "csr_kernel.cpp",
        csrc / "cpu" / "relu_kernel.cpp",
        csrc / "cpu" / "transpose_kernel.cpp",
        csrc / "cpu" / "disk_prefetch.cpp",
    ]
    if with_cuda():
        sources.append(csrc / "cuda" / "gather_kernel.cu")
    missing = [str(path) for path in sources if not path.is_file()]
    if missing:
        raise FileNotFoundError(f"extension sources missing: {missing}")
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
    """Shape functions, so that the ops trace under ``torch.compile`` and ``FakeTensorMode``.

    Like the kernels, a gather's result is ``out`` when given, else a new tensor on ``index``'s
    device (the CUDA kernels gather into the GPU of the ids, also from a pinned CPU ``src``).
    """

    def fake_gather(src, index, out=None):
        if out is not None:
            return out
        return src.new_empty((index.shape[0], src.shape[1]), device=index.device)

    def fake_cached(src, index, cache, slot_of, out=None):
        return fake_gather(src, index, out)

    def fake_attention(h, att_src, att_dst, rowptr, col, negative_slope, self_loops, dropout=None):
        num_src, heads, channels = h.shape
        num_dst = rowptr.shape[0] - 1
        slots = col.shape[0] + (num_dst if self_loops else 0)
        return (
            att_src.new_empty((num_dst, heads, channels)),
            att_src.new_empty((slots, heads)),
            att_src.new_empty((num_src, heads)),
            att_src.new_empty((num_dst, heads)),
        )

    def fake_attention_backward(grad_out, h, att_src, att_dst, *rest):
        return torch.empty_like(h), torch.empty_like(att_src), torch.empty_like(att_dst)

    def fake_csr_sum(rowptr, col, value, x):
        return x.new_empty((rowptr.shape[0] - 1, x.shape[1]))

    def fake_input_gradient(
        rowptr, col, value, grad, root_grad=None, relu_input=None, column_sums=True
    ):
        sums = grad.new_empty(grad.shape[1] if column_sums else 0)
        return grad.new_empty((rowptr.shape[0] - 1, grad.shape[1])), sums

    def fake_csr_sum_into(rowptr, col, value, x, out, root_out=None, index=None, relu=False):
        return None

    def fake_csr_transpose(rowptr, col, value, num_cols):
        return (
            rowptr.new_empty(num_cols + 1),
            col.new_empty(col.shape),
            col.new_empty(col.shape, dtype=torch.float32),
        )

    def fake_bias_relu_(out, bias=None):
        return None

    def fake_transpose_into(src, out):
        return None

    def fake_relu_backward_sum(grad, out):
        return torch.empty_like(grad), grad.new_empty(grad.shape[1])

    def fake_prefetch(src, index, slot_of=None):
        return 0

    torch.library.register_fake("graphengine::prefetch_rows", fake_prefetch)
    torch.library.register_fake("graphengine::gather_rows", fake_gather)
    torch.library.register_fake("graphengine::cached_gather", fake_cached)
    torch.library.register_fake("graphengine::gat_attention", fake_attention)
    torch.library.register_fake("graphengine::csr_sum", fake_csr_sum)
    torch.library.register_fake("graphengine::csr_sum_into", fake_csr_sum_into)
    torch.library.register_fake("graphengine::input_gradient", fake_input_gradient)
    torch.library.register_fake("graphengine::relu_backward_sum", fake_relu_backward_sum)
    torch.library.register_fake("graphengine::csr_transpose", fake_csr_transpose)
    torch.library.register_fake("graphengine::bias_relu_", fake_bias_relu_)
    torch.library.register_fake("graphengine::transpose_into", fake_transpose_into)
    torch.library.register_fake("graphengine::gat_attention_backward", fake_attention_backward)
