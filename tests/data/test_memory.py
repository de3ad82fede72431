"""The memory a process can still take: cgroup v1 and v2 limits read from fake hierarchies
against the numbers written there, and, where this process may make one, a real cgroup v1
memory group's limit."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from graphengine.data.disk_io import proc_field
from graphengine.data.memory import available_memory, cgroup_headroom, cgroup_limit, memory_limit

NO_LIMIT_V1 = 9223372036854771712  # what cgroup v1 writes for "no limit"


def write(directory: Path, files: dict) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (directory / name).write_text(text)


def v1_group(root: Path, path: str, limit: int, usage: int, inactive: int) -> None:
    stat = f"cache 5\nhierarchical_memory_limit {limit}\ntotal_inactive_file {inactive}\n"
    write(root / "memory" / path, {"memory.usage_in_bytes": f"{usage}\n", "memory.stat": stat})


def test_cgroup_v1_headroom_is_the_limit_less_what_cannot_be_dropped(tmp_path):
    membership = "5:cpu,cpuacct:/a\n4:memory:/jobs/one\n0::/\n"
    v1_group(tmp_path, "jobs/one", limit=8_000, usage=5_000, inactive=1_000)
    assert cgroup_headroom(membership, tmp_path) == 4_000
    v1_group(tmp_path, "jobs/one", limit=8_000, usage=9_000, inactive=0)
    assert cgroup_headroom(membership, tmp_path) == 0
    v1_group(tmp_path, "jobs/one", limit=NO_LIMIT_V1, usage=5_000, inactive=0)
    assert cgroup_headroom(membership, tmp_path) is None


def test_cgroup_v1_in_a_namespace_reads_the_mounts_root(tmp_path):
    v1_group(tmp_path, "", limit=3_000, usage=1_000, inactive=0)
    assert cgroup_headroom("4:memory:/not/mounted/here\n", tmp_path) == 2_000


def test_cgroup_v2_takes_the_least_headroom_up_to_the_root(tmp_path):
    write(tmp_path, {"cgroup.controllers": "cpu memory\n"})
    write(tmp_path / "a", {"memory.max": "10000\n", "memory.current": "9000\n"})
    write(
        tmp_path / "a" / "b",
        {"memory.max": "max\n", "memory.current": "100\n", "memory.stat": "inactive_file 50\n"},
    )
    assert cgroup_headroom("0::/a/b\n", tmp_path) == 1_000  # the parent's limit binds
    write(tmp_path / "a", {"memory.max": "max\n"})
    assert cgroup_headroom("0::/a/b\n", tmp_path) is None


def test_cgroup_v2_under_a_hybrid_mount_and_no_files(tmp_path):
    write(tmp_path / "unified", {"cgroup.controllers": "memory\n"})
    write(tmp_path / "unified" / "g", {"memory.max": "4096\n", "memory.current": "96\n"})
    assert cgroup_headroom("1:name=systemd:/\n0::/g\n", tmp_path) == 4_000
    assert cgroup_headroom("0::/g\n", tmp_path / "elsewhere") is None
    assert cgroup_headroom("", tmp_path) is None


def test_cgroup_limit_is_the_least_limit_on_the_path(tmp_path):
    v1_group(tmp_path, "jobs/one", limit=8_000, usage=9_000, inactive=0)
    assert cgroup_limit("4:memory:/jobs/one\n", tmp_path) == 8_000
    v1_group(tmp_path, "jobs/one", limit=NO_LIMIT_V1, usage=5_000, inactive=0)
    assert cgroup_limit("4:memory:/jobs/one\n", tmp_path) is None
    v2 = tmp_path / "v2"
    write(v2, {"cgroup.controllers": "memory\n"})
    write(v2 / "a", {"memory.max": "10000\n"})  # no memory.current: the limit still counts
    write(v2 / "a" / "b", {"memory.max": "30000\n", "memory.current": "100\n"})
    assert cgroup_limit("0::/a/b\n", v2) == 10_000
    assert cgroup_headroom("0::/a/b\n", v2) == 29_900  # the parent's usage is unknown


def test_memory_limit_is_at_most_the_machines():
    total = proc_field("/proc/meminfo", "MemTotal")
    if total is None:
        pytest.skip("no /proc/meminfo here")
    assert 0 < memory_limit() <= total * 1024


def test_available_memory_is_at_most_what_the_system_has():
    system = proc_field("/proc/meminfo", "MemAvailable")
    available = available_memory()
    if system is None:
        pytest.skip("no /proc/meminfo here")
    assert available is not None and 0 <= available <= system * 1024


MEMORY_V1 = Path("/sys/fs/cgroup/memory")


@pytest.mark.skipif(
    not (MEMORY_V1 / "cgroup.procs").exists() or not os.access(MEMORY_V1, os.W_OK),
    reason="no writable cgroup v1 memory hierarchy here",
)
def test_a_cgroup_v1_limit_caps_available_memory():
    group = MEMORY_V1 / f"graphengine-test-{os.getpid()}"
    try:
        group.mkdir()
        (group / "memory.limit_in_bytes").write_text(str(1 << 30))
        code = (
            "from graphengine.data.memory import available_memory, memory_limit; "
            "print(available_memory(), memory_limit())"
        )
        shell = f"echo $$ > {group}/cgroup.procs && exec {sys.executable} -c '{code}'"
        result = subprocess.run(["sh", "-c", shell], capture_output=True, text=True, check=True)
        available, limit = (int(word) for word in result.stdout.split())
        assert 0 < available <= 1 << 30
        assert limit == 1 << 30
    finally:
        if group.exists():
            group.rmdir()
