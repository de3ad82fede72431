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
import glob
import os
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from graphengine.data.files import special_kind

# What follows a file's name in the name of its temporary file (:func:`temporary_path`):
# ".<pid>.<thread id>.tmp", or ".<pid>.tmp" and ".tmp" of older versions.
_TEMPORARY = re.compile(r"\.(?:(\d+)\.(?:\d+\.)?)?tmp")


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


def replace_file(path: str | Path, write: Callable[[BinaryIO], object], name: str) -> Path:
    """Replace the file ``path`` reaches (:func:`output_target`: a symlink's target) by what
    ``write(file)`` writes to an open binary file, through a temporary file beside it
    (:func:`temporary_path`) renamed onto it only once whole and on disk, so that a crash or
    a full disk leaves the previous file. ``name``: how errors call the file
    (``"checkpoint 'run.pt'"``). Returns the file written.

    Raises:
        ValueError: the target exists and is not a regular file (it is neither opened nor
            replaced).
        WriteError: it cannot be written; then it is as it was and the temporary file gone.
    """
    target = output_target(path, name)
    temporary = temporary_path(target)
    try:
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
            with os.fdopen(fd, "wb") as file:
                write(file)
                file.flush()
                os.fsync(fd)  # whole on disk before the rename makes it the file
            os.replace(temporary, target)
        finally:
            temporary.unlink(missing_ok=True)
    except OSError as error:
        raise WriteError(
            f"{name}: cannot write it ({error.strerror or error}); the previous file, if any, "
            "is kept"
        ) from None
    return target


def temporary_path(target: Path) -> Path:
    """The temporary file :func:`replace_file` writes ``target`` through:
    ``<name>.<pid>.<thread id>.tmp`` beside it, one per writer, since two processes or
    threads may write the same file (two runs computing the same cache)."""
    return target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")


def temporaries(path: Path) -> list[tuple[Path, int | None]]:
    """The temporary files of writes of ``path`` beside it, each with the id of the process
    that wrote it (``None`` for the ``<name>.tmp`` of older versions): what a write killed
    mid-way (SIGKILL, which no cleanup catches) leaves, the size of the file."""
    found = []
    for candidate in path.parent.glob(f"{glob.escape(path.name)}.*tmp"):
        match = _TEMPORARY.fullmatch(candidate.name[len(path.name) :])
        if match is not None:
            found.append((candidate, None if match[1] is None else int(match[1])))
    return found
