"""``graphengine bench train --memory-limits``: its figure draws the numbers it is given,
its limits parse and resolve against the store's size, and (as root, with cgroup v1's
memory controller) a command run under a limit is a row, an OOM kill a row that says so,
and the memory group is gone after either."""

import os
import sys
from pathlib import Path

import pytest

from graphengine.bench import cgroup, memory_limits
from graphengine.bench.memory_limits import MemoryLimit, parse_limit, resolve_limit
from graphengine.cli import main
from tests.plot import PNG_SIGNATURE

GB = 10**9


def _row(limit, limit_bytes, step_s, stages, read_mb, faults, error=None):
    return {
        "limit": limit,
        "limit_bytes": limit_bytes,
        "step_s": step_s,
        "stage_s": stages,
        "read_mb": read_mb,
        "major_faults": faults,
        "error": error,
    }


ROWS = [
    _row("none", None, 2.0, {"sample": 0.1, "gather": 1.5, "compute": 0.4}, 500.0, 10.0),
    _row("40%", 4 * GB, 9.0, {"sample": 3.0, "gather": 8.0, "compute": 0.5}, 2000.0, 30000.0),
    _row("1%", GB // 10, None, {}, None, None, error="killed by the OOM killer"),
]


def test_the_figure_draws_each_limits_step_phases_and_reads(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    from graphengine.plot import memory

    figures = []
    save = memory.save_figure
    monkeypatch.setattr(memory, "save_figure", lambda f, p: figures.append(f) or save(f, p))
    summary = {"dataset": "synthetic-papers-s23", "store_bytes": 10 * GB, "rows": ROWS}
    path = memory.plot_memory_limits(summary, tmp_path / "memory.png")
    assert path.read_bytes()[:8] == PNG_SIGNATURE
    times, reads = figures[0].axes[:2]
    heights = [bar.get_height() for bar in times.patches]
    # Four bars a limit, grouped by phase: the step, sample, gather, compute; none for OOM.
    assert heights == [2.0, 9.0, 0.0, 0.1, 3.0, 0.0, 1.5, 8.0, 0.0, 0.4, 0.5, 0.0]
    assert [bar.get_height() for bar in reads.patches] == [500.0, 2000.0, 0.0]
    labels = [label.get_text() for label in times.get_xticklabels()]
    assert labels == ["none", "40%\n4.00 GB", "1%\n100.0 MB"]
    texts = [text.get_text() for text in reads.texts]
    assert texts == ["10 major faults", "30,000 major faults", "killed by the OOM killer"]
    assert "10.00 GB on disk" in figures[0].texts[0].get_text()


@pytest.mark.parametrize(
    "text, store, expected",
    [
        ("none", 100, None),
        (" 40% ", 10**6, 400_000),
        ("4GiB", 1, 4 * 2**30),
        ("1.5GB", 1, 1_500_000_000),
        ("4096b", 1, 4096),
    ],
)
def test_limits_resolve_to_bytes(text, store, expected):
    assert resolve_limit(parse_limit(text), store).bytes == expected


@pytest.mark.parametrize("text", ["40", "0%", "-1GB", "4 parsecs", ""])
def test_a_limit_without_a_unit_or_above_zero_is_refused(text):
    with pytest.raises(ValueError, match="a share of the store"):
        parse_limit(text)


def test_a_limit_below_a_page_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"'0.0001%' is 1 bytes: .* at least 4096"):
        resolve_limit(parse_limit("0.0001%"), 10**6)
    with pytest.raises(ValueError, match="'1B' is 1 bytes"):
        resolve_limit(parse_limit("1B"), 10**6)


@pytest.mark.parametrize("stdout", ["", "not json\n", '{"step_s": 0, "wall": 1}\n'])
def test_a_child_without_its_result_line_is_a_row_that_says_so(stdout):
    row = memory_limits._measurements(0, stdout, None, None)
    assert row["error"] == "exited without its result line (its log is above)"
    assert row["step_s"] is None


def test_the_cli_refuses_a_bad_limit_or_plot_before_any_run(tmp_path, capsys, caplog):
    with pytest.raises(SystemExit) as exit_:
        main(["bench", "train", "--memory-limits", "none,40"])
    assert exit_.value.code == 2 and "--memory-limits" in capsys.readouterr().err
    argv = ["bench", "train", "--memory-limits", "40%", "--root", str(tmp_path)]
    assert main([*argv, "--plot", str(tmp_path / "memory.bmp")]) == 2
    assert "the suffix gives the figure's format" in caplog.text
    assert main([*argv, "--vs", "pyg"]) == 2
    assert "runs graphengine alone" in caplog.text
    assert main([*argv, "--rounds", "3"]) == 2
    assert "--rounds" in caplog.text
    assert main(["bench", "train", "--run-timeout", "5", "--root", str(tmp_path)]) == 2
    assert "--run-timeout times --memory-limits' runs" in caplog.text
    assert list(tmp_path.iterdir()) == []  # refused before any dataset


def test_what_is_missing_is_named(tmp_path, monkeypatch):
    if os.geteuid() == 0:
        assert "memory.limit_in_bytes" in cgroup.unavailable(root=tmp_path)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert "need root" in cgroup.unavailable(root=tmp_path)
    assert "need root" in memory_limits.unavailable(["none"])


def test_the_store_size_is_all_its_files_and_a_dataset_in_memory_has_none(tmp_path):
    from graphengine.bench.plan import bench_spec
    from graphengine.datasets.dataset import GraphDataset
    from graphengine.datasets.synthetic import generate

    generated = generate("tiny", bench_spec(2048, 8))
    generated.save(tmp_path / "tiny")
    folder, size = memory_limits.store_size(GraphDataset.load(tmp_path / "tiny"))
    files = [f for f in (tmp_path / "tiny").rglob("*") if f.is_file()]
    assert folder == tmp_path / "tiny" and len(files) > 3  # the graph's folder counted too
    assert size == sum(f.stat().st_size for f in files)
    with pytest.raises(ValueError, match="held in memory"):
        memory_limits.store_size(GraphDataset.load(tmp_path / "tiny", mmap=False))


needs_cgroup = pytest.mark.skipif(
    cgroup.unavailable() is not None, reason=str(cgroup.unavailable())
)
# What the train bench's process prints last, after allocating MB megabytes.
CHILD = (
    "import json, sys; block = bytearray(int(sys.argv[1]) * 2**20); "
    "print(json.dumps({'step_s': 0.5, 'wall': 2.0, 'peak_rss_gb': 0.1, "
    "'stages': {'sample': 0.4, 'gather': 0.8, 'compute': 1.2, 'waiting': 0.0}, "
    "'io_per_step': {'major_faults': 3.0, 'minor_faults': 9.0, 'read_bytes': 2e6}}))"
)


def _groups():
    return {p.name for p in cgroup.MEMORY_ROOT.iterdir() if p.name.startswith("graphengine-")}


@needs_cgroup
def test_a_run_under_a_limit_is_a_row_and_an_oom_kill_a_row_that_says_so():
    before = _groups()
    command = [sys.executable, "-c", CHILD, "16"]
    fits = memory_limits.limited_row(MemoryLimit("256MB", 256 * 10**6), command, 60)
    assert fits["error"] is None and fits["oom_kills"] == 0
    # 4 steps in 2 s; each stage's seconds over the 4 steps; the reads a step.
    assert fits["step_s"] == 0.5 and fits["read_mb"] == 2.0 and fits["major_faults"] == 3.0
    assert fits["stage_s"] == {"sample": 0.1, "gather": 0.2, "compute": 0.3}
    assert 16 * 2**20 < fits["cgroup_peak_bytes"] <= 256 * 10**6
    killed = memory_limits.limited_row(
        MemoryLimit("64MB", 64 * 10**6), [sys.executable, "-c", CHILD, "256"], 60
    )
    assert killed["error"] == "killed by the OOM killer" and killed["oom_kills"] >= 1
    assert killed["step_s"] is None and killed["cgroup_peak_bytes"] <= 64 * 10**6
    unlimited = memory_limits.limited_row(MemoryLimit("none", None), command, 60)
    assert unlimited["step_s"] == 0.5 and unlimited["cgroup_peak_bytes"] is None
    assert _groups() == before  # every group removed


@needs_cgroup
def test_a_run_past_its_timeout_is_killed_with_what_it_started_and_its_group_removed(
    tmp_path,
):
    before = _groups()
    pid_file = tmp_path / "grandchild.pid"
    started = (
        "import subprocess, sys, time; "
        "child = subprocess.Popen(['sleep', '60']); "
        f"open({str(pid_file)!r}, 'w').write(str(child.pid)); time.sleep(60)"
    )
    row = memory_limits.limited_row(MemoryLimit("1GB", 10**9), [sys.executable, "-c", started], 1)
    assert row["error"] == "timed out after 1 s"
    assert _groups() == before
    status = Path(f"/proc/{int(pid_file.read_text())}/status")
    assert not status.exists() or "State:\tZ" in status.read_text()  # gone, or a dead zombie
