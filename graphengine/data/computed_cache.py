"""Files caching computed arrays (METIS's clusters, GraphSAINT's coefficients) as ``.npz``.

A cache file is named by :func:`cache_key`, a digest of everything its arrays are computed
from, so another graph or other arguments never read it. :func:`read_cached` reads it as data
only (:func:`graphengine.data.format.read_npz`) and hands its arrays back only when they are
whole and pass the caller's check against the graph; a file that is not (a flipped byte, a
truncated write, another file put in its place, arrays of other names, shapes, types or
values) is reported by a warning naming it and why, and the caller computes the arrays again
and :func:`write_cached` overwrites it: since the arrays can always be computed again, a
damaged cache costs that time, not the run. :func:`write_cached` writes through a temporary file
renamed over the cache, so a process killed mid-write leaves no half-written cache; a cache
that cannot be written (a full or read-only disk) is a warning too, never the end of the run.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from pathlib import Path

import numpy as np

from graphengine.data.files import check_regular_file
from graphengine.data.format import read_npz
from graphengine.data.output_files import replace_file

logger = logging.getLogger(__name__)
# How many values :func:`cache_key` converts to int64 at a time (8 MB).
_HASH_CHUNK = 1 << 20


def cache_key(arguments: dict, *arrays: np.ndarray) -> str:
    """A hex digest (32 characters) of ``arguments`` (their ``repr``s) and of ``arrays``
    (integer arrays, hashed as int64 so that their dtype does not matter; each one's length
    is hashed before it, so the bytes cannot shift from one to the next). One pass over them,
    converting :data:`_HASH_CHUNK` values at a time: never an int64 copy of a whole array
    (8 GB for the indices of a billion edges)."""
    digest = hashlib.sha256(repr(sorted(arguments.items())).encode())
    for array in arrays:
        digest.update(f";{np.shape(array)};".encode())
        values = np.asarray(array).reshape(-1)  # C order, as the bytes of a whole copy
        for start in range(0, len(values), _HASH_CHUNK):
            chunk = values[start : start + _HASH_CHUNK]
            digest.update(np.ascontiguousarray(chunk, dtype=np.int64).data)
    return digest.hexdigest()[:32]


def read_cached(
    path: Path, names: tuple[str, ...], check: Callable[[dict[str, np.ndarray]], str | None]
) -> dict[str, np.ndarray] | None:
    """The arrays ``names`` of the cache file ``path``, or ``None`` when there is no such file
    or it does not hold them whole: not a regular file (a FIFO there is never opened), unreadable,
    or refused by ``check`` (given the arrays, it returns why they cannot be this graph's, or
    ``None``). A refused file is logged as a warning naming it and why; the caller computes the
    arrays again and overwrites it."""
    try:
        check_regular_file(path, "cache file")
    except FileNotFoundError:
        return None
    except ValueError as error:
        why = str(error)
    else:
        try:
            arrays = read_npz(path, names)
        except (ValueError, OSError) as error:  # OSError: no permission, or removed meanwhile
            why = str(error)
        else:
            why = check(arrays)
            if why is None:
                return arrays
    logger.warning("cache file '%s' is not usable (%s): computing it again", path, why)
    return None


def write_cached(path: Path, **arrays: np.ndarray) -> None:
    """Write ``arrays`` to the cache file ``path`` (its folder made when missing), through a
    temporary file beside it renamed over it (:func:`~graphengine.data.output_files.replace_file`):
    a reader sees the old file or the new one. Caching is optional: a file that cannot be
    written (a full or read-only disk, no permission, something not a regular file at
    ``path``) is logged as a warning naming it and why, and the run goes on without it."""
    try:
        # np.savez is given the open file: given a name without '.npz' it would add one.
        replace_file(path, lambda file: np.savez(file, **arrays), f"cache file '{path}'")
    except (OSError, ValueError) as error:
        logger.warning("%s; going on without caching it", error)
