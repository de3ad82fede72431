"""Elastic recovery: each restart of torchrun's workers joins its process group in its own
keys of torchrun's store."""

import datetime

import torch.distributed as dist

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
