"""Writing a run's output files (metrics lines, checkpoints) without harming what a path
names, and failing whole.

An output path names a regular file, a missing one (created), or a symlink, which is
followed: what is written is the link's final target (a dangling link's target is created
where its directory exists) and the link itself stays. Anything else at the path or at the
link's end (a directory, a character or block device, a FIFO, a socket, a symlink loop) is
refused with a ``ValueError`` before it is opened, and again after opening, since the path
may change in between; opening never blocks (``O_NONBLOCK``), so a FIFO with no reader
cannot stall training.

A write that fails (a full disk, a read-only file system, no permission) raises
:class:`WriteError` naming the file and the error and leaves the file as it was: an
appended line is cut back off, a replaced file keeps its old contents and no temporary
file stays.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from graphengine.data.files import special_kind


class WriteError(OSError):
    """An output file could not be written; the message names the file and the error, and
    the file is as it was before the write."""


def output_target(path: str | Path, name: str) -> Path:
    """The file that writing ``path`` reaches: ``path`` itself, or for a symlink its final
    target. ``name``: how errors call the path (``"--metrics 'm.jsonl'"``).

    Raises ``ValueError`` naming ``name`` and the kind when the target exists and is not a
    regular file, or the links loop. A missing target, or one that cannot be looked at
    (under a regular file, no permission), is returned for the writer to try."""
    path = Path(path)
    try:
        target = path.resolve(strict=False)
    except RuntimeError:  # Python 3.11's resolve() on a symlink loop
        raise ValueError(f"{name} is a symlink loop: expected a file to write") from None
    try:
        mode = os.stat(target).st_mode
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise ValueError(f"{name} is a symlink loop: expected a file to write") from None
        return target
    kind = special_kind(mode)
    if kind is not None:
        shown = f" (a link to '{target}')" if path.is_symlink() else ""
        raise ValueError(f"{name} is {kind}{shown}: expected a regular file to write")
    return target


def append_line(path: str | Path, line: str) -> None:
    """Append ``line`` and a newline to ``path`` (created if missing) in one write, so that
    a reader never sees part of it; a failed write is cut back off the file.

    Raises:
        ValueError: ``path`` is not a regular file (see :func:`output_target`).
        WriteError: it cannot be opened or written (the message names it and the error).
    """
    name = f"'{path}'"
    target = output_target(path, name)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(target, flags, 0o666)
    except OSError as error:
        raise WriteError(f"{name}: cannot open it to append a line ({error.strerror})") from None
    try:
        info = os.fstat(fd)
        kind = special_kind(info.st_mode)
        if kind is not None:  # replaced since output_target looked
            raise ValueError(f"{name} is {kind}: expected a regular file to write")
        _write_or_truncate(fd, (line + "\n").encode(), info.st_size, name)
    finally:
        os.close(fd)


def _write_or_truncate(fd: int, data: bytes, size: int, name: str) -> None:
    """Write all of ``data`` at the end of ``fd``, a regular file of ``size`` bytes; on an
    error cut the file back to ``size`` and raise :class:`WriteError` naming ``name``."""
    view = memoryview(data)
    try:
        while view:  # a short write (the disk filling up) leaves the rest to write
            view = view[os.write(fd, view) :]
    except OSError as error:
        os.ftruncate(fd, size)
        raise WriteError(
            f"{name}: cannot append a line ({error.strerror}); the file is left as it was"
        ) from None


def replace_file(name: str, target: Path, temporary: Path, chunks: list[bytes]) -> None:
    """Replace ``target`` (an :func:`output_target`) by ``chunks``, written to ``temporary``
    (a name beside it) and renamed onto it only once whole and on disk, so that a crash or
    a full disk leaves the previous file. ``name``: how errors call the file
    (``"checkpoint 'run.pt'"``).

    Raises :class:`WriteError` naming ``name`` when it cannot be written; then ``target`` is
    as it was and ``temporary`` gone."""
    try:
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
            try:
                for chunk in chunks:
                    view = memoryview(chunk)
                    while view:
                        view = view[os.write(fd, view) :]
                os.fsync(fd)  # whole on disk before the rename makes it the file
            finally:
                os.close(fd)
            os.replace(temporary, target)
        finally:
            temporary.unlink(missing_ok=True)
    except OSError as error:
        raise WriteError(
            f"{name}: cannot write it ({error.strerror}); the previous file, if any, is kept"
        ) from None
