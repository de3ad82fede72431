"""A command run under a memory limit: a cgroup v1 memory group made for the run and
removed after it (``graphengine bench train --memory-limits``).

The group's ``memory.limit_in_bytes`` caps what the command may hold, the page cache of the
files it reads or maps included (cgroup v1 charges a page to the group that first touched
it), which is what a machine with that much memory would give it. Past the limit the kernel
reclaims the group's pages, and when nothing can be reclaimed its OOM killer kills the
command: a :class:`LimitedRun` that says so, not an exception. Creating groups needs root
and cgroup v1's memory controller (:func:`unavailable` says which is missing).
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

MEMORY_ROOT = Path("/sys/fs/cgroup/memory")
# The shell joins the group before it turns into the command, so that nothing the command
# allocates or reads is charged outside it: "$0" is the group's cgroup.procs.
_JOIN_THEN_EXEC = 'echo $$ > "$0" && exec "$@"'
# rmdir of a group whose last task has just exited can fail with EBUSY for a moment.
_REMOVE_TRIES = 50
_REMOVE_WAIT_S = 0.1
_NAMES = itertools.count()


@dataclass(frozen=True)
class LimitedRun:
    """How a command run in a memory group ended.

    Attributes:
        returncode: the command's exit code (negative: the signal that killed it; ``-9`` for
            the OOM killer); ``None`` when it ran past its timeout and was killed.
        stdout: what it wrote to its standard output.
        peak_bytes: the group's peak usage (``memory.max_usage_in_bytes``: its processes'
            memory and the page cache charged to it).
        limit_hits: how many times the usage reached the limit (``memory.failcnt``), each
            one a reclaim.
        oom_kills: processes of the group the OOM killer killed (``oom_kill`` of
            ``memory.oom_control``; ``None`` on kernels before 4.13, which do not count).
    """

    returncode: int | None
    stdout: str
    peak_bytes: int
    limit_hits: int
    oom_kills: int | None


def unavailable(root: Path = MEMORY_ROOT) -> str | None:
    """Why memory groups cannot be made here (not root, or no cgroup v1 memory controller
    mounted at ``root``), or ``None`` when they can."""
    if os.geteuid() != 0:
        return f"memory limits need root: they are cgroups made under {root}"
    if not (root / "memory.limit_in_bytes").is_file():
        return (
            f"memory limits need cgroup v1's memory controller, mounted at {root} (no "
            f"{root / 'memory.limit_in_bytes'}; cgroup v2 alone is not supported)"
        )
    return None


def run_limited(
    command: list[str],
    limit_bytes: int,
    root: Path = MEMORY_ROOT,
    timeout_s: float | None = None,
    env: dict[str, str] | None = None,
) -> LimitedRun:
    """Run ``command`` in a new memory group under ``root`` limited to ``limit_bytes``, its
    standard error passed through and its standard output captured; the group is removed
    when the command has ended, however it ended.

    Raises:
        ValueError: ``limit_bytes`` below one page.
        OSError: the group cannot be made (see :func:`unavailable`).
    """
    if limit_bytes < 4096:
        raise ValueError(f"'limit_bytes' must be at least a page, 4096 (got {limit_bytes})")
    group = root / f"graphengine-{os.getpid()}-{next(_NAMES)}"
    group.mkdir()
    try:
        (group / "memory.limit_in_bytes").write_text(str(limit_bytes))
        try:
            done = subprocess.run(
                ["sh", "-c", _JOIN_THEN_EXEC, str(group / "cgroup.procs"), *command],
                stdout=subprocess.PIPE,
                text=True,
                env=env,
                timeout=timeout_s,
                check=False,
            )
            returncode, stdout = done.returncode, done.stdout
        except subprocess.TimeoutExpired as expired:
            returncode, stdout = None, _text(expired.stdout)
        return LimitedRun(
            returncode=returncode,
            stdout=stdout,
            peak_bytes=int((group / "memory.max_usage_in_bytes").read_text()),
            limit_hits=int((group / "memory.failcnt").read_text()),
            oom_kills=_oom_kills((group / "memory.oom_control").read_text()),
        )
    finally:
        _kill_members(group)
        _remove(group)


def _oom_kills(oom_control: str) -> int | None:
    """The ``oom_kill`` count of a ``memory.oom_control`` file's text, if it has one."""
    for line in oom_control.splitlines():
        name, _, value = line.partition(" ")
        if name == "oom_kill":
            return int(value)
    return None


def _text(output: str | bytes | None) -> str:
    """A timed-out run's captured output (``TimeoutExpired`` may hold bytes or nothing)."""
    if isinstance(output, bytes):
        return output.decode(errors="replace")
    return output or ""


def _kill_members(group: Path) -> None:
    """Kill the processes left in the group: a timeout kills only the command, not what it
    started (a compiler, a worker), and a group with members cannot be removed."""
    for _ in range(_REMOVE_TRIES):
        pids = [int(pid) for pid in (group / "cgroup.procs").read_text().split()]
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(_REMOVE_WAIT_S)


def _remove(group: Path) -> None:
    """Remove the group, waiting out the moment after its last task exits when the kernel
    still counts it busy."""
    for _ in range(_REMOVE_TRIES - 1):
        try:
            group.rmdir()
            return
        except OSError as error:
            if error.errno != errno.EBUSY:
                raise
            time.sleep(_REMOVE_WAIT_S)
    group.rmdir()
