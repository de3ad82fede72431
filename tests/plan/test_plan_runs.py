"""``graphengine plan`` and ``train --plan auto`` with 2 gloo workers on synthetic-small: the
JSON line's contract, and the volumes it counts against what training runs report."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from graphengine.distributed.launch import cores_per_worker
from graphengine.plan.planner import TIE_MARGIN

REPO = Path(__file__).resolve().parents[2]
SMALL = ("--fanouts", "5,5", "--batch-size", "256", "--hidden", "32")
ROW_KEYS = {
    "name",
    "parallel",
    "partitioned",
    "epoch_s",
    "step_s",
    "steps",
    "compute_s",
    "sampling_s",
    "gather_s",
    "exchange_s",
    "memory_bytes",
    "fits",
    "why_not",
}


def graphengine(*args, timeout=300) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "graphengine", *map(str, args)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def json_lines(done: subprocess.CompletedProcess) -> list[dict]:
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def train_epoch(root, *extra) -> dict:
    """The one epoch's metrics of a 2-worker ``train``."""
    done = graphengine(
        "train", "--nproc", 2, "--root", root, "--epochs", 1, "--eval-every", 0,
        "--no-progress", *SMALL, *extra,
    )  # fmt: skip
    return json_lines(done)[0]


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    """``plan`` of synthetic-small on every worker and in 2 parts: all four candidates."""
    tmp = tmp_path_factory.mktemp("plan")
    root, parts = tmp / "data", tmp / "parts"
    graphengine(
        "partition", "--dataset", "synthetic-small", "--root", root, "--parts", 2, "--out", parts
    )
    done = graphengine(
        "plan", "--nproc", 2, "--dataset", "synthetic-small", "--root", root,
        "--partitions", parts, *SMALL,
    )  # fmt: skip
    return root, parts, done


def test_plan_prints_a_table_the_choice_and_one_json_line(planned):
    _, _, done = planned
    lines = done.stdout.splitlines()
    plan = json.loads(lines[-1])
    assert set(plan) == {"choice", "reason", "workers", "candidates", "rates", "volumes"}
    assert plan["workers"] == 2
    names = [row["name"] for row in plan["candidates"]]
    assert names == ["data", "hybrid", "partitioned", "hybrid-partitioned"]
    for row in plan["candidates"]:
        assert set(row) == ROW_KEYS
        assert row["epoch_s"] > 0 and row["steps"] > 0 and row["fits"]
    fastest = min(row["epoch_s"] for row in plan["candidates"])
    tied = [r["name"] for r in plan["candidates"] if r["epoch_s"] <= fastest * (1 + TIE_MARGIN)]
    assert plan["choice"] == tied[0]  # the rows are in CANDIDATES' order, data first
    assert any(line.startswith(f"choice: {plan['choice']}") for line in lines)
    assert any(line.split()[:1] == ["hybrid-partitioned"] for line in lines)
    assert plan["rates"]["sample_edges_per_s"] > 0
    assert plan["rates"]["allreduce_bytes_per_s"] > 0
    if "NUMBA_NUM_THREADS" not in os.environ:  # each worker samples on its share of the cores
        assert plan["rates"]["sampler_threads"] == cores_per_worker(2)


def test_counted_volumes_equal_what_training_reports(planned):
    root, parts, done = planned
    volumes = json.loads(done.stdout.splitlines()[-1])["volumes"]
    workers = 2

    data = volumes["data"]
    traffic = train_epoch(root, "--parallel", "data")["traffic"]
    # Gradients: every step each worker all-reduces its DDP buckets, exactly.
    assert traffic["gradient_bytes"] == data["gradient_bytes"] * data["steps"] * workers

    hybrid = volumes["hybrid"]
    traffic = train_epoch(root, "--parallel", "hybrid")["traffic"]
    per_run = hybrid["steps"] * workers
    assert traffic["gradient_bytes"] == hybrid["gradient_bytes"] * per_run
    # Structures and partials follow the sampled batches: counted from a few of them.
    assert traffic["structure_sent_bytes"] == pytest.approx(
        hybrid["structure_bytes"] * per_run, rel=0.15
    )
    assert traffic["partial_sent_bytes"] == pytest.approx(
        hybrid["partial_bytes"] * per_run, rel=0.15
    )

    partitioned = volumes["partitioned"]
    crossed = train_epoch(root, "--partitions", parts)
    per_run = partitioned["steps"] * workers
    assert crossed["traffic"]["gradient_bytes"] == partitioned["gradient_bytes"] * per_run
    assert crossed["partition"]["remote_rows"] == pytest.approx(
        partitioned["remote_rows"] * per_run, rel=0.2
    )
    assert crossed["partition"]["cache_hits"] == 0 and partitioned["cache_hit_rate"] == 0


def test_train_plan_auto_trains_with_the_choice(tmp_path):
    done = graphengine(
        "train", "--nproc", 2, "--root", tmp_path, "--epochs", 2, "--eval-every", 0,
        "--no-progress", "--plan", "auto", *SMALL,
    )  # fmt: skip
    *epochs, final = json_lines(done)
    choice = epochs[0]["plan"]["choice"]
    assert choice in ("data", "hybrid")
    assert final["parallel"] == choice
    for epoch in epochs:
        assert epoch["plan"]["predicted_epoch_s"] > 0 and epoch["epoch_s"] > 0
        assert set(epoch["plan"]) == {
            "choice", "predicted_epoch_s", "compute_s", "sampling_s", "gather_s", "exchange_s"
        }  # fmt: skip
    assert epochs[-1]["loss"] < epochs[0]["loss"]
    assert "--plan auto: training with" in done.stderr
