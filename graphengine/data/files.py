"""What a path is, and opening only regular files.

Every reader of a file graphengine did not write itself (a store's arrays, a manifest, a
cache, a checkpoint, an input archive) checks it with :func:`check_regular_file` before
opening it: a FIFO would block the open until a writer comes, a device would never end, a
directory or a symlink loop would fail with a raw ``OSError``. :func:`special_kind` names what
such a file is, for the readers' and the writers' (:mod:`graphengine.data.output_files`) errors.
"""

from __future__ import annotations

import errno
import stat
from pathlib import Path

# What each kind of file that is not a regular one is called in errors.
_SPECIAL_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
)


def check_regular_file(path: Path, what: str, manifest: Path | None = None) -> None:
    """Refuse anything at ``path`` but a regular file (after symlinks), without opening it;
    the errors name the ``manifest`` that lists the file, when given.

    Raises ``FileNotFoundError`` ("missing ``what``") when nothing is there (a dangling
    symlink included), ``ValueError`` naming a symlink loop, a FIFO, socket, device or
    directory (opening a FIFO would block until a writer comes).
    """
    listed = f" (listed in '{manifest}')" if manifest is not None else ""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise FileNotFoundError(f"missing {what} '{path}'{listed}") from None
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise ValueError(
                f"{what} '{path}'{listed} is a symlink loop, expected a file"
            ) from None
        raise ValueError(f"{what} '{path}'{listed} cannot be read: {error.strerror}") from None
    kind = special_kind(mode)
    if kind is not None:
        raise ValueError(f"{what} '{path}'{listed} is {kind}, expected a regular file")


def special_kind(mode: int) -> str | None:
    """What a file of ``st_mode`` ``mode`` is when it is not a regular file (``"a FIFO"``);
    ``None`` for a regular file."""
    if stat.S_ISREG(mode):
        return None
    return next((kind for test, kind in _SPECIAL_KINDS if test(mode)), "not a regular file")
