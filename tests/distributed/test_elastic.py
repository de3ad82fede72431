"""Elastic recovery: each restart of torchrun's workers joins its process group in its own
keys of torchrun's store, and ``graphengine train --max-restarts K`` is passed to torchrun
(refused where there is no torchrun to pass it to)."""

import datetime

import pytest
import torch.distributed as dist
import torch.distributed.run

from graphengine.cli import main
from graphengine.distributed.launch import attempt_store

TIMEOUT = datetime.timedelta(seconds=10)


def agent_environment(monkeypatch, port: int, restart: int) -> None:
    """The environment torchrun's agent gives restart ``restart``'s only worker."""
    monkeypatch.setenv("TORCHELASTIC_USE_AGENT_STORE", "True")
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", str(restart))
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(port))
    monkeypatch.setenv("WORLD_SIZE", "1")


def test_each_restart_joins_in_its_own_keys_of_the_agents_store(monkeypatch):
    # The agent's store outlives the workers: what attempt 0 published is still there when
    # attempt 1 joins, and a backend reading it would connect to a dead worker.
    agent = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    agent_environment(monkeypatch, agent.port, restart=0)
    attempt_store(TIMEOUT).set("rank_1", "127.0.0.1:1 (a worker killed since)")
    agent_environment(monkeypatch, agent.port, restart=1)
    again = attempt_store(TIMEOUT)
    assert not again.check(["rank_1"])
    again.set("rank_1", "127.0.0.1:2")
    agent_environment(monkeypatch, agent.port, restart=0)
    assert attempt_store(TIMEOUT).get("rank_1") == b"127.0.0.1:1 (a worker killed since)"


def test_without_the_agents_store_torch_rendezvouses_as_before(monkeypatch):
    monkeypatch.delenv("TORCHELASTIC_USE_AGENT_STORE", raising=False)
    assert attempt_store(TIMEOUT) is None


def test_max_restarts_reaches_torchrun_and_not_the_workers(monkeypatch):
    seen = {}
    monkeypatch.setattr(torch.distributed.run, "main", lambda argv: seen.update(argv=argv))
    assert main(["train", "--nproc", "2", "--max-restarts", "3", "--epochs", "1"]) == 0
    launcher, workers = seen["argv"][: seen["argv"].index("-m")], seen["argv"]
    assert "--max-restarts=3" in launcher and "--nproc-per-node=2" in launcher
    assert workers[workers.index("-m") :] == ["-m", "graphengine", "train", "--epochs", "1"]
    assert main(["train", "--nproc=2", "--max-restarts=2"]) == 0
    assert "--max-restarts=2" in seen["argv"] and seen["argv"][-1] == "train"


def test_max_restarts_is_refused_where_no_torchrun_is_started(monkeypatch, caplog):
    assert main(["train", "--max-restarts", "1"]) == 2
    assert "--max-restarts 1 restarts the workers of --nproc N or --partitions" in caplog.text
    assert main(["train", "--task", "link", "--max-restarts", "1"]) == 2
    assert "--task link trains in one process without --max-restarts" in caplog.text
    monkeypatch.setenv("LOCAL_RANK", "0")  # a worker of the user's own torchrun
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert main(["train", "--max-restarts", "2"]) == 2
    assert "under your own torchrun, give it --max-restarts 2 instead" in caplog.text


@pytest.fixture(autouse=True)
def _no_torchrun_environment(monkeypatch):
    """This test process as a user's shell: not a worker of a torchrun."""
    for name in ("LOCAL_RANK", "RANK", "WORLD_SIZE", "TORCHELASTIC_USE_AGENT_STORE"):
        monkeypatch.delenv(name, raising=False)
