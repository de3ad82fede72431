"""Training on a partitioned graph: the single-machine accuracy, resume, and no hang when a
worker dies."""

import json
import subprocess
import sys
from pathlib import Path

import torch

from tests.helpers.processes import assert_killing_rank_1_stops_the_run

REPO = Path(__file__).resolve().parents[2]


def graphengine(*args, timeout=300) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "graphengine", *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=REPO)


def final_record(*args) -> dict:
    done = graphengine(*args)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def partition(dataset: str, root, out, parts: int = 2) -> None:
    done = graphengine(
        "partition", "--dataset", dataset, "--root", root, "--parts", parts, "--out", out
    )
    assert done.returncode == 0, done.stderr[-3000:]


def test_two_parts_reach_the_single_machine_accuracy_on_synthetic_small(tmp_path):
    root, parts = tmp_path / "data", tmp_path / "parts"
    partition("synthetic-small", root, parts)
    common = ["--epochs", 3, "--seed", 0, "--no-progress"]
    single = final_record("train", "--dataset", "synthetic-small", "--root", root, *common)
    split = final_record(
        "train", "--partitions", parts, "--nproc", 2, "--remote-cache", "5%", *common
    )
    assert split["workers"] == 2 and single["test_acc"] > 0.8
    assert abs(split["test_acc"] - single["test_acc"]) <= 0.015, (single, split)


def test_two_parts_reach_the_single_machine_accuracy_on_cora(tmp_path, shared_datasets):
    root, parts = shared_datasets / "planetoid", tmp_path / "parts"
    partition("cora", root, parts)
    common = ["--epochs", 10, "--seed", 0, "--no-progress", "--eval-every", 10]
    single = final_record(
        "train", "--dataset", "cora", "--root", root, "--eval", "sampled", *common
    )
    split = final_record("train", "--partitions", parts, "--nproc", 2, *common)
    assert single["test_acc"] > 0.75
    assert abs(split["test_acc"] - single["test_acc"]) <= 0.015, (single, split)


def test_partition_and_worker_counts_must_match(tmp_path):
    parts = tmp_path / "parts"
    partition("synthetic-small", tmp_path / "data", parts, parts=3)
    done = graphengine("train", "--partitions", parts, "--nproc", 2)
    assert done.returncode == 2
    assert "has 3 parts: train it with one worker per part (--nproc 3), not 2" in done.stderr
    done = graphengine("train", "--dataset", "synthetic-small", "--remote-cache", "5%")
    assert done.returncode == 2 and "--remote-cache needs --partitions" in done.stderr
    done = graphengine("train", "--partitions", parts, "--nproc", 3, "--remote-cache", "5 apples")
    assert done.returncode == 2 and "argument --remote-cache: expected rows" in done.stderr


def test_killed_worker_stops_partitioned_training_naming_its_rank(tmp_path):
    parts, metrics = tmp_path / "parts", tmp_path / "metrics.jsonl"
    partition("synthetic-small", tmp_path / "data", parts)
    command = [sys.executable, "-m", "graphengine", "train", "--partitions", str(parts)]
    command += ["--nproc", "2", "--epochs", "100000", "--eval-every", "0", "--no-progress"]
    command += ["--metrics", str(metrics), "--dist-timeout", "20"]
    assert_killing_rank_1_stops_the_run(command, metrics)


def test_resume_on_parts_continues_identically(tmp_path):
    from graphengine.train.checkpoint import read_state

    parts = tmp_path / "parts"
    partition("synthetic-small", tmp_path / "data", parts)

    def train(epochs, checkpoint):
        final_record(
            "train",
            "--partitions",
            parts,
            "--nproc",
            2,
            "--epochs",
            epochs,
            "--eval-every",
            0,
            "--no-progress",
            "--checkpoint",
            checkpoint,
        )

    train(2, tmp_path / "straight.pt")
    train(1, tmp_path / "resumed.pt")
    train(2, tmp_path / "resumed.pt")
    straight, resumed = read_state(tmp_path / "straight.pt"), read_state(tmp_path / "resumed.pt")
    assert straight["epoch"] == resumed["epoch"] == 2
    for name, value in straight["model"].items():
        assert torch.allclose(value, resumed["model"][name], atol=1e-6), name
