"""On-disk layout shared by the graph and dataset stores: ``.npy`` arrays and a JSON manifest.

Stores are shared between people and machines, so a manifest and the files it names are data,
never trusted: every file name a manifest lists must stay inside the manifest's folder
(:func:`manifest_file`, checked before the file is touched), every field is type- and
range-checked (``manifest_*``), and only regular files are opened
(:func:`graphengine.data.files.check_regular_file`: opening a FIFO would block forever).
"""

from __future__ import annotations

import errno
import json
import logging
import os
import zipfile
import zlib
from collections.abc import Collection
from pathlib import Path, PurePosixPath

import numpy as np

from graphengine.data.files import check_regular_file
from graphengine.data.output_files import replace_file

log = logging.getLogger(__name__)

FEATURE_DTYPE = "float32"  # what batches hand the model (loaders cast half tables' rows)
# What a store's feature tables may hold on disk: float16 halves the bytes a row (disk reads,
# cache rows) at about three significant digits. NumPy's .npy has no bfloat16.
FEATURE_DTYPES = ("float32", "float16")
# What an array file may hold: booleans, integers and floats (never objects or strings).
_ARRAY_KINDS = "biuf"
# What posix_fallocate answers on a file system that does not allocate (not ENOSPC: a full
# disk is an error).
_NO_FALLOCATE = (errno.EOPNOTSUPP, errno.EINVAL)
# What np.load raises on a damaged .npz (found by flipping and truncating every byte of one):
# the zip reader's errors (a bad CRC, a truncated member, an unknown compression method), the
# .npy header parser's, and zlib's for a compressed member. OSError: a read cut short (not
# FileNotFoundError or PermissionError, which :func:`read_npz` lets through).
_DAMAGED_NPZ = (
    OSError,
    ValueError,
    KeyError,
    EOFError,
    RuntimeError,
    NotImplementedError,
    zipfile.BadZipFile,
    zlib.error,
)


def write_manifest(path: Path, fmt: str, version: int, fields: dict) -> None:
    """Write ``{"format": fmt, "version": version, **fields}`` as indented JSON, through a
    temporary file renamed onto ``path`` (:func:`~graphengine.data.output_files.replace_file`):
    the manifest marks its folder complete, so a crash or a full disk must leave no manifest
    rather than a cut one.

    Raises :class:`~graphengine.data.output_files.WriteError` (an ``OSError``) naming
    ``path`` when it cannot be written, ``ValueError`` when ``path`` is not a regular file."""
    text = json.dumps({"format": fmt, "version": version, **fields}, indent=2) + "\n"
    replace_file(path, lambda file: file.write(text.encode()), f"manifest '{path}'")


def read_manifest(
    directory: Path, filename: str, fmt: str, version: int, what: str, keys: tuple[str, ...] = ()
) -> dict:
    """Read and check the manifest ``directory / filename`` of a ``what`` (e.g. "graph").

    Raises ``FileNotFoundError`` when it is missing, ``ValueError`` when it leads outside
    ``directory`` (a symlink), is not a regular file or not a JSON object, names another
    format or version, or lacks one of ``keys``.
    """
    path = directory / filename
    if not is_inside(path, directory):
        raise ValueError(
            f"manifest '{path}' leads outside '{directory}'; a store's files must lie inside "
            "its folder"
        )
    try:
        check_regular_file(path, "manifest")
    except FileNotFoundError:
        raise FileNotFoundError(f"no {what} at '{directory}': '{path}' does not exist") from None
    try:
        manifest = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"corrupt manifest '{path}': {error}") from None
    except RecursionError:
        raise ValueError(f"corrupt manifest '{path}': nested too deeply") from None
    if not isinstance(manifest, dict):
        raise ValueError(f"corrupt manifest '{path}': expected a JSON object")
    if manifest.get("format") != fmt or manifest.get("version") != version:
        raise ValueError(
            f"'{path}' is not a {fmt} version {version} manifest "
            f"(format={manifest.get('format')!r}, version={manifest.get('version')!r})"
        )
    missing = [key for key in keys if key not in manifest]
    if missing:
        raise ValueError(
            f"corrupt manifest '{path}': no {', '.join(map(repr, missing))} "
            f"(a {what} manifest holds {', '.join(keys)})"
        )
    return manifest


def is_count(value) -> bool:
    """Whether a JSON value is a non-negative integer (``true`` is not one)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def manifest_count(manifest: dict, key: str, path: Path, minimum: int = 0) -> int:
    """``manifest[key]`` as a count, or ``ValueError`` naming the manifest ``path`` and the
    value unless it is an integer ``>= minimum`` (``minimum >= 0``)."""
    value = manifest[key]
    if not is_count(value) or value < minimum:
        expected = "a non-negative integer" if minimum == 0 else f"an integer >= {minimum}"
        raise ValueError(f"corrupt manifest '{path}': {key!r} must be {expected} (got {value!r})")
    return value


def manifest_string(manifest: dict, key: str, path: Path) -> str:
    """``manifest[key]``, or ``ValueError`` naming the manifest ``path`` and the value unless
    it is a non-empty string."""
    value = manifest[key]
    if not isinstance(value, str) or not value:
        raise ValueError(
            f"corrupt manifest '{path}': {key!r} must be a non-empty string (got {value!r})"
        )
    return value


def manifest_mapping(manifest: dict, key: str, path: Path) -> dict:
    """``manifest[key]``, or ``ValueError`` naming the manifest ``path`` and the value unless
    it is a JSON object."""
    value = manifest[key]
    if not isinstance(value, dict):
        raise ValueError(
            f"corrupt manifest '{path}': {key!r} must be a JSON object (got {value!r})"
        )
    return value


def manifest_dtype(value, path: Path, entry: str) -> str:
    """``value`` if it is NumPy's name (``str(np.dtype(...))``) of a boolean, integer or float
    dtype, else ``ValueError`` naming the manifest ``path`` and its ``entry``. Another
    spelling of a dtype (``"<f8"``, ``"f4"``, ``"double"``) is refused too: the array files
    are checked against the listed name, so it would pass here and then blame a good file
    ("holds float64, expected <f8")."""
    try:
        dtype = np.dtype(value) if isinstance(value, str) else None
    except (TypeError, ValueError):  # NumPy raises either for a string it cannot parse
        dtype = None
    if dtype is None or dtype.kind not in _ARRAY_KINDS:
        raise ValueError(
            f"corrupt manifest '{path}': {entry} has dtype {value!r}, expected the name of a "
            "NumPy boolean, integer or float dtype"
        )
    if str(dtype) != value:
        raise ValueError(
            f"corrupt manifest '{path}': {entry} has dtype {value!r}, expected NumPy's name "
            f"for it, {str(dtype)!r}"
        )
    return value


def manifest_file(directory: Path, name, path: Path, entry: str) -> Path:
    """``directory / name`` for a file name the manifest ``path`` (in ``directory``) lists, once
    it is known to stay inside ``directory``: ``name`` must be a plain relative name (no
    absolute path, no ``..``), and the joined path, after symlinks, must lie inside the
    resolved ``directory``. Checked before the file is stat'ed, opened or hashed, so that a
    shared store cannot make a reader report on a file outside it.

    Raises ``ValueError`` naming the manifest, its ``entry`` and the name otherwise.
    """
    parts = PurePosixPath(name).parts if isinstance(name, str) else ()
    if not parts or name.startswith("/") or "\\" in name or ".." in parts or "\0" in name:
        raise ValueError(
            f"corrupt manifest '{path}': {entry} names the file {name!r}, expected a relative "
            "name inside its folder (no absolute path, no '..')"
        )
    joined = directory / name
    if not is_inside(joined, directory):
        raise ValueError(
            f"corrupt manifest '{path}': {entry} names '{joined}', which leads outside "
            f"'{directory}'; a store's files must lie inside its folder"
        )
    return joined


def is_inside(path: Path, directory: Path) -> bool:
    """Whether ``path`` lies inside ``directory``, both with their symlinks followed."""
    # realpath, not Path.resolve(): the latter stats the target, which may lie outside.
    return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(directory))


def load_array(
    path: Path, dtype: str, shape: tuple[int, ...], mmap: bool, manifest: Path | None = None
) -> np.ndarray:
    """Load one ``.npy`` file and check its dtype and shape against what a manifest (the
    file ``manifest``, named in the error when given) says."""
    check_regular_file(path, "array file", manifest)
    try:
        array = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except (ValueError, OSError, EOFError) as error:
        raise ValueError(f"corrupt or truncated array file '{path}': {error}") from None
    if str(array.dtype) != dtype or tuple(array.shape) != tuple(shape):
        listed = f" as '{manifest}' lists" if manifest is not None else ""
        raise ValueError(
            f"'{path}' holds {array.dtype} {tuple(array.shape)}, expected {dtype} "
            f"{tuple(shape)}{listed}"
        )
    return array


def read_npz(path: Path, names: tuple[str, ...]) -> dict[str, np.ndarray]:
    """The arrays ``names`` of the ``.npz`` file ``path``, read whole, as data only (an array
    of pickled objects is refused, never unpickled); its other arrays are not read.

    Raises:
        FileNotFoundError: nothing at ``path``.
        PermissionError: ``path`` cannot be opened (no permission): it may be a good file.
        ValueError: naming ``path`` when it is not a regular file (a FIFO is never opened),
            is damaged, another kind of file, or lacks one of ``names``.
    """
    check_regular_file(path, ".npz archive")
    try:
        saved = np.load(path, allow_pickle=False)
        if not isinstance(saved, np.lib.npyio.NpzFile):  # a .npy file's array
            raise ValueError(f"a single {type(saved).__name__}, not an .npz archive")
        with saved:
            missing = [name for name in names if name not in saved.files]
            if missing:
                raise ValueError(f"no {missing} among its arrays {saved.files}")
            return {name: np.asarray(saved[name]) for name in names}
    except (FileNotFoundError, PermissionError):
        raise  # about where the file is, not what it holds
    except _DAMAGED_NPZ as error:
        raise ValueError(
            f"'{path}' is not a readable .npz archive of {list(names)} "
            f"({type(error).__name__}: {error})"
        ) from None


def check_feature_dtype(path: Path, dtype: str, manifest: Path) -> None:
    """Refuse a feature table ``path`` of another dtype than those of
    :data:`FEATURE_DTYPES` (float32, or float16, whose rows loaders hand over as float32):
    an int64 or float64 table would fail inside the first layer as "mat1 and mat2 must have
    the same dtype", naming no file. Checked on the dtype the manifest ``manifest`` lists,
    before the file is opened."""
    if dtype not in FEATURE_DTYPES:
        raise ValueError(
            f"'{path}' holds {dtype} features ('{manifest}' lists them so), expected one of "
            f"{', '.join(FEATURE_DTYPES)}: convert the table (graphengine compact "
            "--feature-dtype) to train on it"
        )


def feature_rows(rows: np.ndarray, dtype: str, path: Path, first_row: int = 0) -> np.ndarray:
    """``rows`` (the rows of the feature table ``path`` from ``first_row`` on) in ``dtype``,
    one of :data:`FEATURE_DTYPES`, C-contiguous, as a store writer writes them.

    Raises ``ValueError`` naming ``path``, the row, the column and the value when a finite
    value lies beyond float16's largest (65504) and ``dtype`` is float16: it would become
    infinity, a silent change no model trains through."""
    if dtype not in FEATURE_DTYPES:
        raise ValueError(
            f"feature dtype must be one of {', '.join(FEATURE_DTYPES)} (got {dtype!r})"
        )
    if dtype == "float16" and rows.dtype != np.float16:
        largest = float(np.finfo(np.float16).max)
        beyond = np.isfinite(rows) & (np.abs(rows) > largest)
        if beyond.any():
            row, *column = np.unravel_index(int(np.argmax(beyond)), rows.shape)
            where = f"row {first_row + int(row)}" + (f", column {int(column[0])}" if column else "")
            raise ValueError(
                f"'{path}' {where} holds {rows[(row, *column)]!s}, beyond float16's "
                f"largest value {largest:g} (it would become inf): scale the features first, "
                "or keep the store float32"
            )
    return np.ascontiguousarray(rows, dtype=dtype)


def save_arrays(
    directory: Path, filename: str, fmt: str, version: int, arrays: dict, fields: dict
) -> None:
    """Write ``arrays`` as ``<key>.npy`` files in ``directory``, then the manifest
    ``filename`` with ``fields`` and every array's dtype and shape (last: it marks the
    directory complete)."""
    for key, array in arrays.items():
        np.save(directory / f"{key}.npy", array)
    listing = {key: [str(a.dtype), list(a.shape)] for key, a in arrays.items()}
    write_manifest(directory / filename, fmt, version, {**fields, "arrays": listing})


def array_listing(
    manifest: dict, path: Path, names: Collection[str]
) -> dict[str, tuple[str, tuple[int, ...]]]:
    """The manifest's ``arrays`` (as :func:`save_arrays` writes it) checked: a JSON object
    listing exactly ``names``, each as ``[dtype name, [non-negative ints]]``. Returns name ->
    ``(dtype, shape)``; raises ``ValueError`` naming the manifest ``path`` and the entry."""
    listed = manifest_mapping(manifest, "arrays", path)
    if set(listed) != set(names):
        raise ValueError(
            f"corrupt manifest '{path}': 'arrays' lists {sorted(listed)}, expected {sorted(names)}"
        )
    listing = {}
    for name, entry in listed.items():
        if (
            not isinstance(entry, list)
            or len(entry) != 2
            or not isinstance(entry[1], list)
            or not all(is_count(size) for size in entry[1])
        ):
            raise ValueError(
                f"corrupt manifest '{path}': 'arrays' entry {name!r} must be [dtype, shape] "
                f"with a list of non-negative integers as the shape (got {entry!r})"
            )
        dtype = manifest_dtype(entry[0], path, f"'arrays' entry {name!r}")
        listing[name] = (dtype, tuple(entry[1]))
    return listing


def load_listed(
    directory: Path, path: Path, listing: dict[str, tuple[str, tuple[int, ...]]], mmap: bool
) -> dict[str, np.ndarray]:
    """The arrays ``<name>.npy`` of ``listing`` (name -> ``(dtype, shape)``, from the manifest
    ``path`` in ``directory``), each file checked to lie inside ``directory`` before it is
    opened and to hold what is listed; memory-mapped unless ``mmap=False``."""
    return {
        name: load_array(
            manifest_file(directory, f"{name}.npy", path, f"'arrays' entry {name!r}"),
            dtype,
            shape,
            mmap,
            path,
        )
        for name, (dtype, shape) in listing.items()
    }


def open_allocated_memmap(path: Path, dtype, shape: tuple[int, ...]) -> np.memmap:
    """A new ``.npy`` file of ``dtype`` and ``shape`` at ``path``, memory-mapped for writing,
    its blocks allocated on disk first where the system can.

    A store written through a memory map onto a disk that fills up gets ``SIGBUS``, which
    kills the process without a word; allocating first turns that into an ``OSError``
    (``ENOSPC``) here, which the writers of a store report (:mod:`graphengine.datasets.writing`).
    Where allocating is not offered (macOS has no ``posix_fallocate``; some file systems
    answer ``EOPNOTSUPP`` or ``EINVAL``) the file is written unallocated, as before.
    """
    array = np.lib.format.open_memmap(path, "w+", dtype, shape)
    if not hasattr(os, "posix_fallocate"):
        log.debug("'%s' not preallocated: this system has no posix_fallocate", path)
        return array
    with open(path, "r+b") as file:
        try:
            os.posix_fallocate(file.fileno(), 0, array.offset + array.nbytes)
        except OSError as error:
            if error.errno not in _NO_FALLOCATE:
                raise
            log.debug("'%s' not preallocated: %s", path, error.strerror)
    return array


class NpyWriter:
    """A ``.npy`` file of ``dtype`` and ``shape`` written sequentially: the header, then the
    caller's raw bytes (``write``), C order; on closing, checks that exactly the array's bytes
    were written."""

    def __init__(self, path: Path, dtype, shape: tuple[int, ...]):
        self.path, self.dtype, self.shape = path, np.dtype(dtype), shape
        self.expected = int(np.prod(shape)) * self.dtype.itemsize

    def __enter__(self):
        self.file = open(self.path, "wb")
        header = {"descr": np.lib.format.dtype_to_descr(self.dtype), "fortran_order": False}
        np.lib.format.write_array_header_1_0(self.file, {**header, "shape": self.shape})
        self.start = self.file.tell()
        return self.file

    def __exit__(self, kind, error, trace):
        written = self.file.tell() - self.start
        self.file.close()
        if kind is None and written != self.expected:
            raise RuntimeError(
                f"'{self.path}': wrote {written} bytes of data, expected {self.expected}"
            )
