"""Checks that a command's output paths can be written, made before any work so that a bad
path costs no epoch or partition: each raises ``ValueError`` naming the option and the path
(exit code 2).

Writability is tried, not read from the mode bits: a temporary file is created and removed
in the directory. Root writes in a read-only directory, so there the check passes, as the
write later would; a read-only file system or a path under a regular file fails for root too.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from graphengine.data.output_files import output_target


def check_output_file(option: str, path: str | Path, replaced: bool = False) -> None:
    """Refuse ``path`` as the file ``option`` writes: a directory, a character or block
    device, a FIFO, a socket or a symlink loop (never opened: a device or FIFO would be
    written, blocked on or replaced), or a file whose directory is missing, not a directory
    or not writable. A symlink is followed: its final target is what is checked and
    written, a dangling link's target is created (:mod:`graphengine.data.output_files`).
    ``replaced``: the writer creates missing directories and writes a temporary file that
    it renames over the target (a checkpoint), so only the directory needs to be writable;
    else the file is appended to in place and, if it exists, must itself be writable."""
    target = output_target(path, f"{option} '{path}'")
    if not replaced and target.exists() and not os.access(target, os.W_OK):
        raise ValueError(f"{option} '{path}' is not writable")
    directory = _existing_ancestor(target.parent) if replaced else target.parent
    _check_writable_directory(option, path, directory)


def check_figure_file(option: str, path: str | Path) -> None:
    """Refuse ``option``'s figure file before any work (a long benchmark): a path that cannot
    be written (:func:`check_output_file`), a suffix matplotlib does not write (it gives the
    format), or matplotlib missing; each a ``ValueError`` naming the option (exit code 2)."""
    from graphengine.plot.figure import require_matplotlib

    check_output_file(option, path)
    try:
        require_matplotlib()
    except ImportError as error:
        raise ValueError(f"{option} '{path}': {error}") from None
    from matplotlib.backend_bases import FigureCanvasBase

    formats = FigureCanvasBase.get_supported_filetypes()
    if Path(path).suffix.lstrip(".").lower() not in formats:
        raise ValueError(
            f"{option} '{path}': the suffix gives the figure's format, one of "
            f"{', '.join('.' + f for f in sorted(formats))}"
        )


def check_output_directory(option: str, path: str | Path) -> None:
    """Refuse ``path`` as the directory ``option`` writes in (created if missing): an existing
    file, or under a directory that cannot be written."""
    target = Path(path)
    if target.exists() and not target.is_dir():
        raise ValueError(f"{option} '{path}' is a file: expected a directory to write in")
    _check_writable_directory(option, path, _existing_ancestor(target))


def check_data_root(path: str | Path) -> None:
    """Refuse ``--root`` where no dataset can be kept: a file, a path under a file, or a
    missing directory that cannot be created. A root that exists is not tried for writing:
    a read-only one serves the datasets already in it."""
    target = Path(path)
    if target.exists():
        if not target.is_dir():
            raise ValueError(f"--root '{path}' is a file: expected the directory of the datasets")
        return
    _check_writable_directory("--root", path, _existing_ancestor(target))


def _existing_ancestor(path: Path) -> Path:
    """``path`` or its nearest ancestor that exists (as anything: a file stops the walk)."""
    while not path.exists() and not path.is_symlink() and path != path.parent:
        path = path.parent
    return path


def _check_writable_directory(option: str, path: str | Path, directory: Path) -> None:
    """Refuse ``option``'s ``path`` unless a file can be created in ``directory``."""
    if not directory.exists():
        raise ValueError(f"{option} '{path}': the directory '{directory}' does not exist")
    if not directory.is_dir():
        raise ValueError(f"{option} '{path}': '{directory}' is a file, not a directory")
    try:
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as error:
        raise ValueError(
            f"{option} '{path}': cannot write in '{directory}' ({error.strerror})"
        ) from None
