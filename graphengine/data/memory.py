"""How much memory this process may use (:func:`memory_limit`) and can still take
(:func:`available_memory`): the machine's, within the memory limit of the process's cgroup (a
container's, or one set with cgroup v1's ``memory.limit_in_bytes`` or v2's ``memory.max``),
which ``/proc/meminfo`` does not show.
"""

from __future__ import annotations

from pathlib import Path

from graphengine.data.disk_io import proc_field

CGROUP_ROOT = Path("/sys/fs/cgroup")
_NO_LIMIT = 1 << 60  # cgroup v1 writes "no limit" as a number near 2^63


def available_memory() -> int | None:
    """The bytes this process can still allocate without swapping or its cgroup's OOM
    killer: the least of the system's ``MemAvailable`` and the headroom under each memory
    limit on the process's cgroup path. ``None`` where the platform says neither."""
    kib = proc_field("/proc/meminfo", "MemAvailable")
    system = None if kib is None else kib * 1024
    try:
        membership = Path("/proc/self/cgroup").read_text()
    except OSError:
        membership = ""
    limits = [h for h in (system, cgroup_headroom(membership, CGROUP_ROOT)) if h is not None]
    return min(limits) if limits else None


def memory_limit() -> int | None:
    """The most memory this process may use, in bytes: its cgroup's memory limit where one
    is set, else (and at most) the machine's ``MemTotal``; ``None`` where neither is known."""
    kib = proc_field("/proc/meminfo", "MemTotal")
    try:
        membership = Path("/proc/self/cgroup").read_text()
    except OSError:
        membership = ""
    found = [kib * 1024 if kib is not None else None, cgroup_limit(membership, CGROUP_ROOT)]
    limits = [limit for limit in found if limit is not None]
    return min(limits) if limits else None


def cgroup_headroom(membership: str, root: Path) -> int | None:
    """The bytes left under the memory limits of the cgroup that ``membership`` (the text
    of ``/proc/self/cgroup``) names, with the hierarchies mounted under ``root``; ``None``
    without a limit or where the files are missing. Page cache that the kernel can drop
    (``inactive_file``) counts as free, as it does for ``MemAvailable``."""
    headrooms = [
        max(0, limit - usage + inactive)
        for limit, usage, inactive in _limited_groups(membership, root)
        if usage is not None
    ]
    return min(headrooms) if headrooms else None


def cgroup_limit(membership: str, root: Path) -> int | None:
    """The least memory limit on the cgroup path that ``membership`` names (as
    :func:`cgroup_headroom`), in bytes; ``None`` without one."""
    limits = [limit for limit, _, _ in _limited_groups(membership, root)]
    return min(limits) if limits else None


def _limited_groups(membership: str, root: Path) -> list[tuple[int, int | None, int]]:
    """``(limit, usage, inactive_file)`` of each cgroup on the process's path that has a
    memory limit: cgroup v1's one hierarchical limit, or each ``memory.max`` up v2's tree."""
    groups = {}  # "memory" (cgroup v1's controller) or "" (the v2 hierarchy) -> path
    for line in membership.splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            groups.setdefault(controller, path)
    if "memory" in groups:
        return _v1_limits(_cgroup_dir(root / "memory", groups["memory"]))
    for mount in (root, root / "unified"):
        if "" in groups and (mount / "cgroup.controllers").exists():
            return _v2_limits(_cgroup_dir(mount, groups[""]), mount)
    return []


def _cgroup_dir(mount: Path, path: str) -> Path:
    """The directory of cgroup ``path`` under ``mount``; the mount itself where the path is
    not there (in a cgroup namespace, the process's own group is the mount's root)."""
    directory = mount / path.lstrip("/")
    return directory if directory.is_dir() else mount


def _v1_limits(directory: Path) -> list[tuple[int, int | None, int]]:
    stat = _stat(directory / "memory.stat")
    limit = stat.get("hierarchical_memory_limit")
    if limit is None or limit >= _NO_LIMIT:
        return []
    usage = _number(directory / "memory.usage_in_bytes")
    return [(limit, usage, stat.get("total_inactive_file", 0))]


def _v2_limits(directory: Path, root: Path) -> list[tuple[int, int | None, int]]:
    """Each ``memory.max`` from ``directory`` up to the hierarchy's root."""
    found = []
    while True:
        limit = _number(directory / "memory.max")
        if limit is not None:
            inactive = _stat(directory / "memory.stat").get("inactive_file", 0)
            found.append((limit, _number(directory / "memory.current"), inactive))
        if directory == root or root not in directory.parents:
            return found
        directory = directory.parent


def _number(path: Path) -> int | None:
    """The integer in a cgroup file; ``None`` for "max" (no limit) or a missing file."""
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _stat(path: Path) -> dict[str, int]:
    """A cgroup ``memory.stat`` file as name -> value; empty where missing."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return {}
    return {name: int(value) for name, value in (line.split() for line in lines if line)}
