"""Pickles that hold only data: NumPy arrays, SciPy sparse matrices (CSR, CSC, COO), and lists
and dicts of them and of numbers, as the Planetoid raw files are (pickled by Python 2).

A pickle is a small program: its GLOBAL opcodes import any callable of any module and REDUCE
calls it, so a plain ``pickle.load`` of a downloaded file runs whatever the file names
(``os.system``, ``builtins.eval``, ``subprocess.Popen``...). :func:`load_data_pickle` looks a
global up only when it is one of :data:`ALLOWED_GLOBALS`, checked on the name before its module
is imported, and refuses any other before anything of the file has run.

The admitted callables are constructors of data that check what they are given, and two are
narrowed further: a dtype is made only of booleans, integers or floats (:func:`_plain_dtype`:
no objects, fields or sub-arrays), and text is encoded only as latin-1 (:func:`_latin1`). A
dtype's state, which a pickle sets by BUILD on the dtype it made, must leave it the plain dtype
its type code names: NumPy applies that state unchecked, so forged flags would let an array
take raw bytes from the file as pointers to Python objects. BUILD is applied only to instances
of the admitted array and matrix types: with a slot state it sets any attribute, so on a class
(``csr_matrix.format = 'coo'``) it would change the class for the whole process and turn off
the readers' checks of the matrices. That needs the Python unpickler, whose opcodes can be
overridden (the C one's BUILD cannot be); the files it reads are small.

What is not guarded here: sizes (a file may ask for a large array) and the values inside the
arrays, which the reader of each format checks.
"""

from __future__ import annotations

import codecs
import pickle
import warnings
from pathlib import Path
from typing import ClassVar

import numpy as np
import scipy.sparse as sp

_NUMPY_CORE = ("numpy.core", "numpy._core")  # NumPy 1's and NumPy 2's names of one module
_SPARSE = {"csr": "csr_matrix", "csc": "csc_matrix", "coo": "coo_matrix"}

# (module, name) as a pickle spells them; old and new spellings of each.
ALLOWED_GLOBALS = frozenset(
    {("numpy", "ndarray"), ("numpy", "dtype")}
    | {(f"{core}.multiarray", "_reconstruct") for core in _NUMPY_CORE}
    | {(f"{core}.multiarray", "scalar") for core in _NUMPY_CORE}
    | {(f"{core}.numeric", "_frombuffer") for core in _NUMPY_CORE}  # protocol 5's arrays
    # SciPy before 1.8 kept each format in scipy.sparse.<format>, later in scipy.sparse._<format>.
    | {(f"scipy.sparse.{prefix}{fmt}", cls) for fmt, cls in _SPARSE.items() for prefix in ("", "_")}
    | {("collections", "defaultdict")}
    # Python 3 pickles bytes at protocols 0 to 2 as latin-1 text encoded back to bytes.
    | {("_codecs", "encode")}
    | {(builtins, "list") for builtins in ("__builtin__", "builtins")}  # Python 2's and 3's
)
# What BUILD may set the state of: instances of these, never a class or a function.
_BUILDABLE = (np.ndarray, np.dtype, sp.csr_matrix, sp.csc_matrix, sp.coo_matrix)
DATA_KINDS = "NumPy arrays, SciPy CSR/CSC/COO matrices, lists and dicts"


def _plain_dtype(*args) -> np.dtype:
    """``numpy.dtype(*args)`` as a pickle calls it, refused unless it is a plain dtype of
    booleans, integers or floats (an object, structured or sub-array dtype never is)."""
    dtype = np.dtype(*args)
    if not _is_plain(dtype):
        raise pickle.UnpicklingError(
            f"refused the dtype {dtype!r}: a file of {DATA_KINDS} holds booleans, integers "
            "and floats"
        )
    return dtype


def _is_plain(dtype: np.dtype) -> bool:
    """Whether ``dtype`` is what its type code alone makes: booleans, integers or floats with
    NumPy's own flags, size and alignment for them (none of which a pickle may change)."""
    if dtype.kind not in "biuf" or dtype.fields is not None or dtype.subdtype is not None:
        return False
    canonical = np.dtype(dtype.str)
    return (dtype.flags, dtype.itemsize, dtype.alignment) == (
        canonical.flags,
        canonical.itemsize,
        canonical.alignment,
    )


def _latin1(text: str, encoding: str = "utf-8") -> bytes:
    """``_codecs.encode`` as Python 3 pickles bytes at protocols 0 to 2 (``latin1`` text),
    refused for any other codec, whose lookup would go through every registered search
    function."""
    if encoding.replace("-", "").replace("_", "").lower() not in ("latin1", "iso88591"):
        raise pickle.UnpicklingError(f"refused the codec {encoding!r}: bytes are latin-1 text")
    return codecs.encode(text, "latin1")


# Globals admitted but narrowed: what the unpickler calls in their place.
_NARROWED = {("numpy", "dtype"): _plain_dtype, ("_codecs", "encode"): _latin1}


class _DataUnpickler(pickle._Unpickler):
    """The Python unpickler, admitting only :data:`ALLOWED_GLOBALS` and BUILD of data."""

    dispatch: ClassVar[dict] = dict(pickle._Unpickler.dispatch)

    def find_class(self, module: str, name: str):
        if (module, name) not in ALLOWED_GLOBALS:
            raise pickle.UnpicklingError(
                f"refused the global '{module}.{name}': a file of {DATA_KINDS} does not name "
                "it, and nothing of the file was run"
            )
        return _NARROWED.get((module, name)) or super().find_class(module, name)

    def _load_build(self) -> None:
        target = self.stack[-2] if len(self.stack) > 1 else None
        if isinstance(target, type) or not isinstance(target, _BUILDABLE):
            raise pickle.UnpicklingError(
                f"refused to set the state of {target!r}: only {DATA_KINDS} are built"
            )
        super().load_build()
        if isinstance(target, np.dtype) and not _is_plain(target):
            raise pickle.UnpicklingError(
                f"refused a dtype whose state makes it other than {np.dtype(target.str)!r} "
                f"(flags {target.flags:#x}, itemsize {target.itemsize}): a file of "
                f"{DATA_KINDS} holds plain numbers"
            )

    dispatch[pickle.BUILD[0]] = _load_build


def load_data_pickle(path: str | Path):
    """Unpickle the file ``path`` (Python 2's strings read as latin-1, as NumPy's and SciPy's
    objects of then need), admitting only :data:`DATA_KINDS`.

    Raises:
        pickle.UnpicklingError: the file names another global (the message names it) or
            sets the state of something other than an array or matrix; nothing it names has
            been called. Other errors of a damaged pickle as ``pickle.load`` raises them.
    """
    with Path(path).open("rb") as file, warnings.catch_warnings():
        # NumPy 2 and SciPy warn when a file names their modules as older versions did.
        warnings.filterwarnings("ignore", category=DeprecationWarning, message=r".*numpy\.core")
        warnings.filterwarnings("ignore", category=DeprecationWarning, message=r".*scipy\.sparse")
        return _DataUnpickler(file, encoding="latin1").load()
