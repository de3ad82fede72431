"""Files that are not regular files, and small file systems, for the output-path tests: a
character device of /dev/full's numbers made in a test's own folder (no test writes to a
real /dev node), a FIFO, a socket, a full tmpfs and a read-only one. Each skips the test
where the system does not permit it (mknod and mount need root)."""

import contextlib
import os
import socket
import stat
import subprocess
from pathlib import Path

import pytest

# /dev/full: every write fails with ENOSPC, so a test that wrote to it would fail loudly.
FULL_DEVICE = os.makedev(1, 7)


def char_device(path: Path) -> Path:
    """A character device node at ``path`` (/dev/full's numbers); skips without mknod."""
    try:
        os.mknod(path, stat.S_IFCHR | 0o600, FULL_DEVICE)
    except OSError as error:  # PermissionError without CAP_MKNOD
        pytest.skip(f"cannot make a device node here: {error}")
    return path


def fifo(path: Path) -> Path:
    """A FIFO at ``path``, with no reader."""
    os.mkfifo(path)
    return path


@contextlib.contextmanager
def unix_socket(path: Path):
    """A bound Unix socket at ``path`` for the block's duration."""
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        yield path


@contextlib.contextmanager
def tmpfs(path: Path, size: str = "64k", read_only: bool = False):
    """A tmpfs of ``size`` mounted at ``path`` (made) for the block's duration, read-only
    when asked; skips where mounting is not permitted."""
    path.mkdir(exist_ok=True)
    options = f"size={size}" + (",ro" if read_only else "")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "none", str(path)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True)


def fill(directory: Path) -> None:
    """Fill ``directory``'s file system until a write fails with ENOSPC."""
    fd = os.open(directory / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"x" * 4096)
    finally:
        os.close(fd)
