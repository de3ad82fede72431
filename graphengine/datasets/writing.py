"""Writing a dataset's store under a data root: tried before the work (generating
synthetic-products takes a while, and a read-only root failed only at its end), and a
failed write named and undone, so that a half-written store is not opened later."""

from __future__ import annotations

import contextlib
import errno
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from graphengine.data.output_files import WriteError

# The errors of a store that cannot be written where it goes, whatever is written; others
# (a missing input file, a bug) pass as they are.
_CANNOT_WRITE = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EFBIG}


@contextlib.contextmanager
def writing_store(name: str, path: Path) -> Iterator[None]:
    """Around writing dataset ``name``'s store to the folder ``path``: first make the folder
    and a file in it, then turn an ``OSError`` of a store that cannot be written (a full
    disk, a read-only file system, no permission) into one :class:`WriteError` naming the
    dataset, the file and the error. A store that did not exist before is removed when its
    writing fails in any way (an interrupt too), so that the next run generates it again
    instead of opening part of it (the manifest, written last, marks a store complete, and
    a full disk may cut it).

    Raises:
        WriteError: ``path`` cannot be written, before or while the store is written.
    """
    existed = path.exists()
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as error:
        if not existed:
            shutil.rmtree(path, ignore_errors=True)
        if error.errno not in _CANNOT_WRITE:
            raise
        raise WriteError(
            f"dataset {name!r} cannot be written to '{path}' ({error.strerror}): give a "
            "writable --root (or GRAPHENGINE_DATA), or put the dataset there"
        ) from None
    try:
        yield
    except BaseException as error:  # an interrupt too: no half store stays
        if not existed:
            shutil.rmtree(path, ignore_errors=True)
        if not _cannot_write(error):
            raise
        where = f"'{error.filename}'" if error.filename else f"'{path}'"
        # NumPy reports a short write without an errno: "N requested and M written".
        reason = error.strerror or f"{error}: a short write, as a full disk makes"
        raise WriteError(
            f"writing dataset {name!r} failed at {where} ({reason})"
            + ("; the partial store was removed" if not existed else "")
        ) from None


def _cannot_write(error: BaseException) -> bool:
    """Whether ``error`` says a file could not be written where it goes (an ``OSError`` of
    those errnos, or NumPy's short write, which has none) rather than something else."""
    if isinstance(error, WriteError) or not isinstance(error, OSError):
        return False
    # NumPy's short write is a plain OSError; its subclasses without an errno (a missing
    # input file raised by a reader with a message of its own) are not about writing.
    return error.errno in _CANNOT_WRITE or (type(error) is OSError and error.errno is None)
