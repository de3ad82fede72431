"""Elastic recovery: ``graphengine train --nproc 2 --max-restarts 1 --checkpoint FILE`` with a
worker killed mid-epoch is restarted whole by torchrun, resumes from the last checkpoint and
ends with the weights of a run that was never interrupted; and the pieces that makes work:
each restart's process group in its own keys of torchrun's store, ``--max-restarts`` passed
to torchrun and refused where there is no torchrun to pass it to."""

import datetime
import json
import os
import signal
import subprocess
import time

import pytest
import torch
import torch.distributed as dist
import torch.distributed.run

from graphengine.cli import main
from graphengine.distributed.launch import attempt_store
from graphengine.train.checkpoint import read_state
from tests.helpers.processes import REPO, descendants, environment, train_command

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


def test_a_worker_killed_mid_epoch_is_restarted_and_ends_as_an_uninterrupted_run(tmp_path):
    """Two workers on gloo, 3 epochs, a checkpoint every epoch; rank 1 is killed (SIGKILL)
    in epoch 2, after epoch 1's checkpoint was written: torchrun restarts both, they resume
    at epoch 1, and the run ends as one never interrupted, bit for bit."""

    def command(name: str) -> list[str]:
        # --batch-size 4 (after train_command's 256: the last one counts) makes epochs of 400
        # steps (seconds, not tenths), so that the kill lands in epoch 2 well before its end,
        # however late this process sees epoch 1's checkpoint appear.
        return train_command(
            tmp_path / "data",
            3,
            *("--max-restarts", 1, "--batch-size", 4, "--seed", 7, "--eval-every", 0),
            *("--checkpoint", tmp_path / f"{name}.pt", "--metrics", tmp_path / f"{name}.jsonl"),
        )

    straight = subprocess.run(
        command("straight"), capture_output=True, text=True, timeout=240, cwd=REPO
    )
    assert straight.returncode == 0, straight.stderr[-3000:]

    checkpoint = tmp_path / "killed.pt"
    launcher = subprocess.Popen(
        command("killed"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO
    )
    try:
        deadline = time.monotonic() + 120
        while not checkpoint.exists():  # written at epoch 1's end, then epoch 2 starts
            assert launcher.poll() is None, launcher.stderr.read()[-3000:]
            assert time.monotonic() < deadline, "epoch 1 did not end"
            time.sleep(0.02)
        rank_1 = [pid for pid in descendants(launcher.pid) if environment(pid).get("RANK") == "1"]
        os.kill(rank_1[0], signal.SIGKILL)
        _, stderr = launcher.communicate(timeout=180)
    finally:
        if launcher.poll() is None:
            launcher.kill()
    assert launcher.returncode == 0, stderr[-3000:]
    assert "joined (gloo, restart 1 of 1)" in stderr, stderr[-3000:]
    # Resumed at epoch 1: the kill came in epoch 2, before its checkpoint.
    assert stderr.count(f"resumed from {checkpoint} at epoch 1") == 2, stderr[-3000:]

    def losses(name: str) -> list[tuple[int, float]]:
        lines = (tmp_path / f"{name}.jsonl").read_text().splitlines()
        return [(m["epoch"], m["loss"]) for m in map(json.loads, lines)]

    assert [epoch for epoch, _ in losses("killed")] == [1, 2, 3]
    assert losses("killed") == losses("straight")
    # Bit for bit, not merely close: the resumed workers restore the weights, Adam's
    # moments, each rank's RNG and the loader's epoch, and gloo's all-reduce of two workers
    # is one addition, the same either way round; with OMP_NUM_THREADS=1 (torchrun's
    # default) each worker's kernels reduce in a fixed order.
    expected, resumed = read_state(tmp_path / "straight.pt"), read_state(checkpoint)
    assert expected["epoch"] == resumed["epoch"] == 3
    assert expected["model"].keys() == resumed["model"].keys()
    for name, value in expected["model"].items():
        assert torch.equal(value, resumed["model"][name]), name
    for index, state in expected["optimizer"]["state"].items():
        for key, value in state.items():
            assert torch.equal(value, resumed["optimizer"]["state"][index][key]), (index, key)


@pytest.fixture(autouse=True)
def _no_torchrun_environment(monkeypatch):
    """This test process as a user's shell: not a worker of a torchrun."""
    for name in ("LOCAL_RANK", "RANK", "WORLD_SIZE", "TORCHELASTIC_USE_AGENT_STORE"):
        monkeypatch.delenv(name, raising=False)
