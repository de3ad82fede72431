"""graphengine's operators: the C++/CUDA extension (``csrc/``) behind Python wrappers, with
torch fallbacks.

The extension registers ``torch.ops.graphengine.*``: row gathers with a CPU and, when the
installed torch has CUDA, a CUDA kernel, and CPU kernels for the fused layers; :mod:`.build`
compiles it on first use. One module per op family holds its Python wrapper and fake kernel:
:mod:`.gather` (``gather_rows``, ``cached_gather``), :mod:`.prefetch`, :mod:`.read_rows`,
:mod:`.threads`, :mod:`.csr`, :mod:`.relu`, :mod:`.transpose`, :mod:`.gat`. Whether the
extension computes is decided in one place, :mod:`.backend`:

- ``"auto"`` (the default): the extension when it builds, else ``torch.index_select`` with
  one ``RuntimeWarning``;
- ``"csrc"``: the extension, or :class:`ExtensionUnavailableError` (an ``ImportError``) with
  the build error and what to do;
- ``"torch"``: ``torch.index_select``, without building anything.

Pick it per call (``backend=``) or for the process (:func:`set_backend`, or the
``GRAPHENGINE_OPS_BACKEND`` environment variable, read at the first gather).
"""

from __future__ import annotations

# Importing an op family's module declares its fake kernels; the build registers every declared
# one once the extension is loaded.
from graphengine.ops import csr, gat, relu, transpose
from graphengine.ops.backend import BACKENDS, ExtensionUnavailableError, get_backend, set_backend
from graphengine.ops.build import (
    INSTALL_HINT,
    build_error,
    build_extension,
    library_path,
    sources_dir,
    with_cuda,
)
from graphengine.ops.gather import cached_gather, check_index, gather_rows
from graphengine.ops.prefetch import prefetch_rows
from graphengine.ops.read_rows import io_uring_probe, read_rows
from graphengine.ops.threads import set_intraop_threads

__all__ = [
    "BACKENDS",
    "INSTALL_HINT",
    "ExtensionUnavailableError",
    "build_error",
    "build_extension",
    "cached_gather",
    "check_index",
    "csr",
    "gat",
    "gather_rows",
    "get_backend",
    "io_uring_probe",
    "library_path",
    "prefetch_rows",
    "read_rows",
    "relu",
    "set_backend",
    "set_intraop_threads",
    "sources_dir",
    "transpose",
    "with_cuda",
]
