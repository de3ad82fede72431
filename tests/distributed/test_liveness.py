"""Naming the worker that stopped answering: heartbeats over a real TCPStore (a worker whose
heartbeat stops is named, a store that stops answering names the workers on its host, all
answering names no one), and ``graphengine train --nproc 2`` with one worker stopped by
SIGSTOP mid-training: the other ends within ``--dist-timeout`` naming it, and so does
torchrun's root cause."""

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest
import torch.distributed as dist

from graphengine.distributed import liveness
from graphengine.distributed.liveness import Heartbeat, WorkerLost, lost_worker
from tests.helpers.processes import REPO, descendants, environment

TIMEOUT_S = 2.0  # the heartbeat's pace follows: a round every 0.1 s, stale after 1 s
GLOO_TIMEOUT = RuntimeError(
    "[third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 2000ms "
    "for recv operation to complete"
)
# A store in its own process, so that it can be stopped: prints its port, then waits.
STORE = """
import datetime, sys, time
import torch.distributed as dist
store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
print(store.port, flush=True)
time.sleep(600)
"""


def heartbeats(port: int, world_size: int = 2) -> list[Heartbeat]:
    """``world_size`` started heartbeats on the store at ``127.0.0.1:port`` (each start
    waits for every worker's, so they start together)."""
    beats = [
        Heartbeat(r, world_size, TIMEOUT_S, "127.0.0.1", port, "test") for r in range(world_size)
    ]
    threads = [threading.Thread(target=beat.start) for beat in beats]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert all(beat.peers for beat in beats)
    return beats


@pytest.fixture
def store():
    return dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)


@pytest.fixture
def stoppable_store():
    """A store served by another process, and that process."""
    server = subprocess.Popen([sys.executable, "-c", STORE], stdout=subprocess.PIPE, text=True)
    try:
        yield int(server.stdout.readline()), server
    finally:
        server.kill()
        server.wait(timeout=30)


def test_a_worker_whose_heartbeat_stops_is_named(store):
    beats = heartbeats(store.port, 3)
    try:
        time.sleep(5 * beats[0].interval_s)
        assert beats[0].silent()[0] == []  # every worker answers
        beats[2].stop()
        start = time.monotonic()
        lost = beats[0].explain(GLOO_TIMEOUT)
        waited = time.monotonic() - start
    finally:
        for beat in beats:
            beat.stop()
    assert isinstance(lost, WorkerLost) and lost.ranks == (2,)
    message = str(lost)
    assert message.startswith(f"lost worker 2 (127.0.0.1, pid {os.getpid()}): stopped answering")
    assert "Timed out waiting 2000ms" in message and "\n" not in message
    # Its last beat came up to a round before it stopped.
    pace = beats[0].interval_s
    assert beats[0].stale_s - 2 * pace <= waited < beats[0].stale_s + 5 * pace + 1, waited


def test_every_worker_answering_names_no_one(store):
    beats = heartbeats(store.port)
    try:
        start = time.monotonic()
        lost = beats[1].explain(GLOO_TIMEOUT)
        waited = time.monotonic() - start
    finally:
        for beat in beats:
            beat.stop()
    assert lost.ranks == ()
    assert "every one of the 2 workers still answers its heartbeat" in str(lost)
    assert "no lost worker can be named" in str(lost)
    assert waited >= beats[1].stale_s


def test_a_silent_store_names_the_workers_on_its_host(stoppable_store):
    port, server = stoppable_store
    beats = heartbeats(port)
    try:
        time.sleep(5 * beats[0].interval_s)
        server.send_signal(signal.SIGSTOP)  # as a cut link: no answer, no closed socket
        lost = beats[0].explain(GLOO_TIMEOUT)
    finally:
        for beat in beats:
            beat.stop()
        server.send_signal(signal.SIGCONT)
    # Both workers reach the store from 127.0.0.1: the other one is on the store's host.
    assert lost.ranks == (1,)
    assert str(lost).startswith(f"lost worker 1 (127.0.0.1, pid {os.getpid()}): ")
    assert f"the rendezvous store at 127.0.0.1:{port}, on its host, stopped answering" in str(lost)


def test_only_failed_collectives_are_explained(store, monkeypatch):
    beats = heartbeats(store.port)
    monkeypatch.setattr(liveness, "_current", beats[0])
    beats[1].stop()
    try:
        assert lost_worker(ValueError("a bug")) is None  # keeps its own traceback
        assert lost_worker(RuntimeError("size mismatch")) is None
        wrapped = RuntimeError("a loader thread failed")
        wrapped.__cause__ = GLOO_TIMEOUT
        assert lost_worker(wrapped).ranks == (1,)
        assert lost_worker(dist.DistNetworkError("Connection reset by peer")).ranks == (1,)
        already = WorkerLost("lost worker 1", (1,))
        assert lost_worker(already) is already
        with (
            pytest.raises(WorkerLost, match="lost worker 1") as raised,
            liveness.naming_lost_workers(),
        ):
            raise GLOO_TIMEOUT
        assert raised.value.__cause__ is GLOO_TIMEOUT
    finally:
        beats[0].stop()


def test_no_heartbeat_alone_or_without_a_store(monkeypatch):
    monkeypatch.setattr(liveness, "_current", None)
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    assert liveness.start_heartbeat(0, 2, 10.0) is None
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "1")
    assert liveness.start_heartbeat(0, 1, 10.0) is None
    assert lost_worker(GLOO_TIMEOUT) is None
    with pytest.raises(ValueError, match="'timeout_s' must be positive"):
        Heartbeat(0, 2, 0.0, "127.0.0.1", 1)
    with pytest.raises(ValueError, match=r"'rank' must be in \[0, world_size=2\) \(got 2\)"):
        Heartbeat(2, 2, 10.0, "127.0.0.1", 1)


DIST_TIMEOUT = 8


def test_a_stopped_worker_is_named_by_the_other_and_by_torchrun(tmp_path):
    metrics, errors = tmp_path / "metrics.jsonl", tmp_path / "stderr.txt"
    command = [sys.executable, "-m", "graphengine", "train", "--nproc", "2"]
    command += ["--dataset", "synthetic-small", "--root", tmp_path / "data"]
    command += ["--fanouts", "5,5", "--batch-size", "256", "--epochs", "100000"]
    command += ["--eval-every", "0", "--no-progress", "--metrics", metrics]
    command += ["--dist-timeout", DIST_TIMEOUT]
    with errors.open("w") as stderr:
        launcher = subprocess.Popen(
            list(map(str, command)), stdout=subprocess.DEVNULL, stderr=stderr, cwd=REPO
        )
    victim = None
    try:
        deadline = time.monotonic() + 180
        while not (metrics.exists() and metrics.read_text().strip()):
            assert launcher.poll() is None, errors.read_text()[-3000:]
            assert time.monotonic() < deadline, "training did not start"
            time.sleep(0.5)
        ranks = {environment(pid).get("RANK"): pid for pid in descendants(launcher.pid)}
        victim = ranks["1"]
        os.kill(victim, signal.SIGSTOP)
        stopped_at = time.monotonic()
        while "rank 0: lost" not in errors.read_text() and launcher.poll() is None:
            assert time.monotonic() - stopped_at < DIST_TIMEOUT + 60, errors.read_text()[-3000:]
            time.sleep(0.2)
        named_after = time.monotonic() - stopped_at
        # torchrun would wait 30 s for the stopped worker to take its SIGTERM.
        os.kill(victim, signal.SIGKILL)
        launcher.wait(timeout=60)
    finally:
        if launcher.poll() is None:
            launcher.kill()
        if victim is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(victim, signal.SIGKILL)
    stderr = errors.read_text()
    assert DIST_TIMEOUT - 1 <= named_after < DIST_TIMEOUT + 15, (named_after, stderr[-3000:])
    line = next(line for line in stderr.splitlines() if "rank 0: lost" in line)
    assert re.search(r"rank 0: lost worker 1 \([\d.]+, pid \d+\): stopped answering", line), line
    assert "the collective waiting for it failed" in line
    # torchrun's root cause is rank 0 (it failed; the stopped one never did), quoting it.
    root_cause = stderr[stderr.index("Root Cause") :]
    assert "rank      : 0" in root_cause and "exitcode  : 3" in root_cause, root_cause
    assert "WorkerLost: lost worker 1 (" in root_cause, root_cause
    assert launcher.returncode == 3
