"""On-disk layout shared by the graph and dataset stores: ``.npy`` arrays and a JSON manifest."""

from __future__ import annotations

import json
import zipfile
import zlib
from pathlib import Path

import numpy as np

# What np.load raises on a damaged .npz (found by flipping and truncating every byte of one):
# the zip reader's errors (a bad CRC, a truncated member, an unknown compression method), the
# .npy header parser's, and zlib's for a compressed member.
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
    """Write ``{"format": fmt, "version": version, **fields}`` as indented JSON."""
    path.write_text(json.dumps({"format": fmt, "version": version, **fields}, indent=2) + "\n")


def read_manifest(
    directory: Path, filename: str, fmt: str, version: int, what: str, keys: tuple[str, ...] = ()
) -> dict:
    """Read and check the manifest ``directory / filename`` of a ``what`` (e.g. "graph").

    Raises ``FileNotFoundError`` when it is missing, ``ValueError`` when it is not a JSON
    object, names another format or version, or lacks one of ``keys``.
    """
    path = directory / filename
    if not path.is_file():
        raise FileNotFoundError(f"no {what} at '{directory}': '{path}' does not exist")
    try:
        manifest = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise ValueError(f"corrupt manifest '{path}': {error}") from None
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


def manifest_count(manifest: dict, key: str, path: Path) -> int:
    """``manifest[key]`` as a count, or ``ValueError`` naming the manifest ``path`` and the
    value unless it is a non-negative integer."""
    value = manifest[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(
            f"corrupt manifest '{path}': {key!r} must be a non-negative integer (got {value!r})"
        )
    return value


def load_array(path: Path, dtype: str, shape: tuple[int, ...], mmap: bool) -> np.ndarray:
    """Load one ``.npy`` file and check its dtype and shape against what a manifest says."""
    if not path.is_file():
        raise FileNotFoundError(f"missing array file '{path}'")
    try:
        array = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except (ValueError, OSError, EOFError) as error:
        raise ValueError(f"corrupt or truncated array file '{path}': {error}") from None
    if str(array.dtype) != dtype or tuple(array.shape) != tuple(shape):
        raise ValueError(
            f"'{path}' holds {array.dtype} {tuple(array.shape)}, expected {dtype} {tuple(shape)}"
        )
    return array


def read_npz(path: Path, names: tuple[str, ...]) -> dict[str, np.ndarray]:
    """The arrays ``names`` of the ``.npz`` file ``path``, read whole, as data only (an array
    of pickled objects is refused, never unpickled).

    Raises ``ValueError`` naming ``path`` when it is damaged, another kind of file, or lacks
    one of ``names``.
    """
    try:
        saved = np.load(path, allow_pickle=False)
        if not isinstance(saved, np.lib.npyio.NpzFile):  # a .npy file's array
            raise ValueError(f"a single {type(saved).__name__}, not an .npz archive")
        with saved:
            missing = [name for name in names if name not in saved.files]
            if missing:
                raise ValueError(f"no {missing} among its arrays {saved.files}")
            return {name: np.asarray(saved[name]) for name in names}
    except _DAMAGED_NPZ as error:
        raise ValueError(
            f"'{path}' is not a readable .npz archive of {list(names)} "
            f"({type(error).__name__}: {error})"
        ) from None


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


def load_arrays(
    directory: Path,
    filename: str,
    fmt: str,
    version: int,
    what: str,
    mmap: bool,
    keys: tuple[str, ...] = (),
) -> tuple[dict, dict]:
    """``(manifest, arrays)`` of a directory :func:`save_arrays` wrote, every array checked
    against the manifest (memory-mapped unless ``mmap=False``); the manifest must hold
    ``keys`` besides ``arrays``."""
    manifest = read_manifest(directory, filename, fmt, version, what, ("arrays", *keys))
    arrays = {
        key: load_array(directory / f"{key}.npy", dtype, tuple(shape), mmap)
        for key, (dtype, shape) in manifest["arrays"].items()
    }
    return manifest, arrays


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
