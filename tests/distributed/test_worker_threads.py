"""Each worker's share of its host's cores for Numba: ``launch`` sets ``NUMBA_NUM_THREADS``
for its workers, and a worker of a user's own torchrun without it is told how to set it."""

import importlib
import logging
import os

import numba
import pytest
import torch.distributed.run

from graphengine.distributed.emulated_cluster import EmulatedCluster

# The package re-exports the function ``launch``, which hides the module of the same name.
launching = importlib.import_module("graphengine.distributed.launch")


def cores() -> int:
    return len(os.sched_getaffinity(0))


@pytest.mark.parametrize("workers", [1, 2, 3, 64])
def test_cores_per_worker_divides_this_hosts_cores(workers):
    assert launching.cores_per_worker(workers) == max(1, cores() // workers)


def run_launch(monkeypatch, nproc: int) -> dict:
    """The environment torchrun's launcher would hand its workers from ``launch(nproc)``."""
    seen = {}

    def fake_torchrun(argv):
        seen["argv"] = argv
        seen["numba_threads"] = os.environ.get("NUMBA_NUM_THREADS")

    monkeypatch.setattr(torch.distributed.run, "main", fake_torchrun)
    assert launching.launch(nproc, ["train"]) == 0
    return seen


def test_launch_gives_each_worker_its_share_of_the_cores(monkeypatch):
    monkeypatch.delenv("NUMBA_NUM_THREADS", raising=False)
    seen = run_launch(monkeypatch, 2)
    assert f"--nproc-per-node={2}" in seen["argv"]
    assert seen["numba_threads"] == str(max(1, cores() // 2))
    # Only the workers get it: Numba in this process re-reads the environment when it
    # compiles, and its threads are launched.
    assert "NUMBA_NUM_THREADS" not in os.environ


def test_launch_keeps_the_users_numba_threads(monkeypatch):
    # This process's own count, which Numba may re-read while the variable is set.
    users = str(numba.config.NUMBA_NUM_THREADS)
    monkeypatch.setenv("NUMBA_NUM_THREADS", users)
    assert run_launch(monkeypatch, 2)["numba_threads"] == users
    assert os.environ["NUMBA_NUM_THREADS"] == users


def test_one_worker_keeps_numbas_default(monkeypatch):
    monkeypatch.delenv("NUMBA_NUM_THREADS", raising=False)
    assert run_launch(monkeypatch, 1)["numba_threads"] is None


def test_a_shared_host_without_numba_threads_is_warned_with_the_fix(monkeypatch, caplog):
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    monkeypatch.delenv("NUMBA_NUM_THREADS", raising=False)
    with caplog.at_level(logging.WARNING, logger=launching.__name__):
        launching._check_numba_threads()
    assert f"NUMBA_NUM_THREADS={max(1, cores() // 2)}" in caplog.text
    caplog.clear()
    monkeypatch.setenv("NUMBA_NUM_THREADS", str(numba.config.NUMBA_NUM_THREADS))
    with caplog.at_level(logging.WARNING, logger=launching.__name__):
        launching._check_numba_threads()
    assert caplog.text == ""


def test_emulated_hosts_share_this_machines_cores(monkeypatch, tmp_path):
    monkeypatch.delenv("NUMBA_NUM_THREADS", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    cluster = EmulatedCluster(3, tmp_path)  # nothing is brought up before ``with``
    env = cluster.env(cluster.hosts[1])
    assert env["NUMBA_NUM_THREADS"] == env["OMP_NUM_THREADS"] == str(max(1, cores() // 3))
    assert cluster.env(cluster.hosts[1], {"OMP_NUM_THREADS": "7"})["OMP_NUM_THREADS"] == "7"
