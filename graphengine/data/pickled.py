"""Pickles that hold only data: NumPy arrays, SciPy sparse matrices (CSR, CSC, COO), and lists
and dicts of them and of numbers, as the Planetoid raw files are (pickled by Python 2).

A pickle is a small program: its GLOBAL opcodes import any callable of any module and REDUCE
calls it, so a plain ``pickle.load`` of a downloaded file runs whatever the file names
(``os.system``, ``builtins.eval``, ``subprocess.Popen``...). :func:`load_data_pickle` looks a
global up only when it is one of :data:`ALLOWED_GLOBALS`, checked on the name before its module
is imported, and refuses any other before anything of the file has run.

The admitted callables are constructors of data that check what they are given: NumPy's
``_reconstruct`` makes only ``ndarray`` subtypes (``ndarray`` is the only one admitted), no
admitted constructor makes an object array from raw bytes (NumPy refuses), and an object
array's items are unpickled by the same rules. BUILD is applied only to instances of the
admitted array and matrix types: with a slot state it sets any attribute, so on a class
(``csr_matrix.format = 'coo'``) it would change the class for the whole process and turn off
the readers' checks of the matrices. That needs the Python unpickler, whose opcodes can be
overridden (the C one's BUILD cannot be); the files it reads are small.

What is not guarded here: sizes (a file may ask for a large array) and the values inside the
arrays, which the reader of each format checks.
"""

from __future__ import annotations

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
    # Python 3 pickles bytes at protocols 0 to 2 as text encoded back to bytes; the codec is
    # looked up only among the standard library's encodings.
    | {("_codecs", "encode")}
    | {(builtins, "list") for builtins in ("__builtin__", "builtins")}  # Python 2's and 3's
)
# What BUILD may set the state of: instances of these, never a class or a function.
_BUILDABLE = (np.ndarray, np.dtype, sp.csr_matrix, sp.csc_matrix, sp.coo_matrix)
DATA_KINDS = "NumPy arrays, SciPy CSR/CSC/COO matrices, lists and dicts"


class _DataUnpickler(pickle._Unpickler):
    """The Python unpickler, admitting only :data:`ALLOWED_GLOBALS` and BUILD of data."""

    dispatch: ClassVar[dict] = dict(pickle._Unpickler.dispatch)

    def find_class(self, module: str, name: str):
        if (module, name) not in ALLOWED_GLOBALS:
            raise pickle.UnpicklingError(
                f"refused the global '{module}.{name}': a file of {DATA_KINDS} does not name "
                "it, and nothing of the file was run"
            )
        return super().find_class(module, name)

    def _load_build(self) -> None:
        target = self.stack[-2] if len(self.stack) > 1 else None
        if isinstance(target, type) or not isinstance(target, _BUILDABLE):
            raise pickle.UnpicklingError(
                f"refused to set the state of {target!r}: only {DATA_KINDS} are built"
            )
        state = self.stack[-1]
        # A dtype's state is (version, byteorder, subarray, names, fields, ...): the files hold
        # plain numbers, and a structured dtype's offsets and sizes are the state NumPy
        # checks least.
        if isinstance(target, np.dtype) and not (
            isinstance(state, tuple) and len(state) >= 5 and state[2:5] == (None, None, None)
        ):
            raise pickle.UnpicklingError(
                f"refused a structured or sub-array dtype (state {state!r:.80}): a file of "
                f"{DATA_KINDS} holds plain numbers"
            )
        super().load_build()

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
        warnings.simplefilter("ignore")  # NumPy 2 and SciPy warn at their old module names
        return _DataUnpickler(file, encoding="latin1").load()
