"""The launcher and its workers: the exit code of a run whose worker failed (its own code, or
3 for a worker a signal ended, named); a worker's end (a failed last barrier, a bug) that
never raises into the process group's teardown; workers that stop when their launcher is
killed or interrupted, under ``graphengine train --nproc 2`` and under a plain torchrun; and
``--dist-timeout`` within what torch's deadlines hold."""

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

from graphengine.cli import build_parser, main
from graphengine.distributed import liveness
from graphengine.distributed.launch import (
    INTERRUPTED,
    LOST_WORKER,
    ending_on_error,
    failure_exit_code,
    finish,
)
from tests.helpers.processes import REPO, train_command, wait_until_trained, workers

# The seconds the workers of a killed launcher may take to stop: their watch looks every second.
STOPPED_WITHIN_S = 30


def failed(*failures: tuple[int, int, int]) -> ChildFailedError:
    """torchrun's error for workers that failed, each ``(rank, pid, exitcode)`` in the order
    they were seen (without error files, torchrun stamps each when it sees it)."""
    return ChildFailedError(
        "graphengine",
        {rank: ProcessFailure(rank, pid, code, "<N/A>") for rank, pid, code in failures},
    )


def test_a_worker_a_signal_ended_is_a_lost_worker_named_with_the_signal(caplog):
    # The agent stops the other worker with SIGTERM once it sees the killed one.
    error = failed((1, 4242, -signal.SIGKILL), (0, 4241, -signal.SIGTERM))
    with caplog.at_level(logging.ERROR):
        assert failure_exit_code(error) == LOST_WORKER == 3
    assert "rank 1 (pid 4242) was ended by SIGKILL, without an error of its own" in caplog.text


@pytest.mark.parametrize("code", [1, 2, 3])
def test_a_worker_that_exited_gives_the_run_its_exit_code(code, caplog):
    assert failure_exit_code(failed((0, 4241, code), (1, 4242, -signal.SIGTERM))) == code
    assert "was ended by" not in caplog.text


class Exited(Exception):
    """``os._exit`` in a test: the code the worker would have exited with."""

    def __init__(self, code: int):
        super().__init__(code)
        self.code = code


@pytest.fixture
def exits(monkeypatch):
    """``finish`` in this process: it raises :class:`Exited` where it would exit, and leaves
    the test's logging and the process group alone."""

    def exit_(code: int):
        raise Exited(code)

    monkeypatch.setattr(os, "_exit", exit_)
    monkeypatch.setattr(logging, "shutdown", lambda: None)
    monkeypatch.setattr(dist, "get_rank", lambda: 0)
    monkeypatch.setattr(liveness, "_current", None)  # no heartbeat to name the lost one


def test_a_worker_whose_last_barrier_fails_exits_3_instead_of_raising(exits, monkeypatch, caplog):
    def barrier():
        raise RuntimeError("[../gloo/transport/tcp/pair.cc:534] Connection closed by peer")

    monkeypatch.setattr(dist, "barrier", barrier)
    with pytest.raises(Exited) as exited:
        finish(0)
    assert exited.value.code == LOST_WORKER
    assert "rank 0: the workers did not all reach the end: " in caplog.text
    assert "Connection closed by peer" in caplog.text


def test_a_worker_whose_last_barrier_passes_exits_with_its_code(exits, monkeypatch, caplog):
    monkeypatch.setattr(dist, "barrier", lambda: None)
    with pytest.raises(Exited) as exited:
        finish(0)
    assert exited.value.code == 0 and caplog.text == ""


def gone(pid: int) -> bool:
    """Whether process ``pid`` has ended (a zombie its new parent has not reaped has)."""
    try:
        status = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return status.rpartition(")")[2].split()[0] == "Z"


def plain_torchrun(root: Path, metrics: Path) -> list[str]:
    """A user's own torchrun starting 2 ``graphengine train`` workers on synthetic-small."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    command += ["--nproc-per-node=2", "-m", "graphengine", "train", "--epochs", "100000"]
    command += ["--root", str(root), "--fanouts", "5,5", "--batch-size", "256"]
    return [*command, "--no-progress", "--metrics", str(metrics), "--eval-every", "0"]


@pytest.mark.parametrize(
    "launcher_kind, signum",
    [
        ("graphengine", signal.SIGKILL),
        ("graphengine", signal.SIGTERM),
        ("graphengine", signal.SIGINT),
        ("torchrun", signal.SIGKILL),
    ],
    ids=["graphengine-SIGKILL", "graphengine-SIGTERM", "graphengine-SIGINT", "torchrun-SIGKILL"],
)
def test_workers_stop_when_their_launcher_is_killed(tmp_path, launcher_kind, signum):
    metrics, errors = tmp_path / "metrics.jsonl", tmp_path / "stderr.txt"
    if launcher_kind == "graphengine":
        command = train_command(tmp_path / "data", 100000, "--metrics", metrics, "--eval-every", 0)
    else:
        command = plain_torchrun(tmp_path / "data", metrics)
    with errors.open("w") as stderr:
        launcher = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr, cwd=REPO)
    started = []
    try:
        wait_until_trained(launcher, metrics, errors.read_text)
        started = list(workers(launcher.pid).values())
        assert len(started) == 2, started
        os.kill(launcher.pid, signum)
        launcher.wait(timeout=60)
        killed_at = time.monotonic()
        while not all(map(gone, started)):
            assert time.monotonic() - killed_at < STOPPED_WITHIN_S, errors.read_text()[-3000:]
            time.sleep(0.2)
    finally:
        if launcher.poll() is None:
            launcher.kill()
        for pid in started:
            if not gone(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
    log = errors.read_text()
    if signum == signal.SIGKILL:
        for rank in (0, 1):
            assert (
                f"rank {rank}: the process that started this worker (pid {launcher.pid}) is gone"
            ) in log, log[-3000:]
    else:  # torchrun's agent stops the workers itself, and says so
        assert launcher.returncode == INTERRUPTED, log[-3000:]
        assert f"interrupted ({signum.name}): the workers were stopped" in log, log[-3000:]
    if signum == signal.SIGINT:  # the workers see Ctrl-C as the launcher does
        assert "interrupted: no checkpoint was saved" in log, log[-3000:]


@pytest.mark.parametrize("command", ["train", "plan"])
def test_a_dist_timeout_past_a_week_is_refused_before_any_worker_starts(command, capsys):
    # 1e10 s overflows torch's deadlines: the workers' store failed at once, with a traceback.
    with pytest.raises(SystemExit) as exited:
        main([command, "--nproc", "2", "--dist-timeout", "1e10"])
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert "argument --dist-timeout: must be in [1, 604800] seconds (got 1e10)" in error
    assert build_parser().parse_args([command, "--dist-timeout", "604800"]).dist_timeout == 604800


def test_a_bug_in_one_of_several_workers_ends_it_with_its_traceback_recorded(
    exits, monkeypatch, tmp_path, caplog
):
    error_file = tmp_path / "error.json"
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(error_file))
    with pytest.raises(Exited) as exited, ending_on_error(1, 2):
        raise ZeroDivisionError("a bug")
    assert exited.value.code == 1
    assert "rank 1 failed" in caplog.text and "ZeroDivisionError: a bug" in caplog.text
    # torchrun's "Root Cause" quotes this file rather than an exit code.
    assert "ZeroDivisionError: a bug" in json.loads(error_file.read_text())["message"]["message"]


def test_a_bug_of_a_worker_alone_keeps_its_traceback(exits):
    with pytest.raises(ZeroDivisionError), ending_on_error(0, 1):
        raise ZeroDivisionError("a bug")
