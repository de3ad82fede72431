"""Hybrid (P3) parallelism on a partitioned graph, as P3 itself runs: the redistribution of the
parts' rows to feature columns against the unpartitioned table (each worker holding only its
own part), and an epoch against partitioned data parallelism (the same batches and samples),
2 and 3 workers, and with a worker whose part has no training node."""

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from graphengine.data.columns import column_ranges
from graphengine.data.partition import load_partition, partition_dataset
from graphengine.datasets import load_dataset
from tests.helpers.processes import WORKERS, torchrun
from tests.helpers.workers.partition_worker import multigraph

WORKER = WORKERS / "hybrid_worker.py"
REPO = Path(__file__).resolve().parents[2]
# The sampler's counts, which must be the same when the same batches are sampled.
SAMPLED = ("frontier_nodes", "remote_frontier_nodes", "served_edges", "cut_edges")


@pytest.fixture(scope="module")
def partitions(tmp_path_factory) -> dict[int, Path]:
    """synthetic-small in 2 and 3 METIS parts."""
    root = tmp_path_factory.mktemp("data")
    dataset = load_dataset("synthetic-small", root=root)
    out = {}
    for parts in (2, 3):
        out[parts] = root / f"parts-{parts}"
        partition_dataset(dataset, parts, out[parts])
    return out


def own_parts_only(partition: Path, hosts: Path, num_parts: int) -> Path:
    """``hosts/host-<r>``: a copy of ``partition`` holding part ``r`` only (the manifest, the
    id maps and ``part-<r>/``), as a host of a cluster holds it."""
    for rank in range(num_parts):
        host = hosts / f"host-{rank}"
        host.mkdir(parents=True)
        for entry in partition.iterdir():
            if entry.is_file():
                shutil.copy2(entry, host / entry.name)
        shutil.copytree(partition / f"part-{rank}", host / f"part-{rank}")
    return hosts


@pytest.mark.parametrize("nproc", [2, 3])
def test_redistributed_columns_are_every_node_s_features_by_new_id(tmp_path, partitions, nproc):
    hosts = own_parts_only(partitions[nproc], tmp_path / "hosts", nproc)
    out = tmp_path / "columns"
    result = torchrun(nproc, WORKER, "columns", out, hosts)
    assert result.returncode == 0, result.stderr[-3000:]
    dataset = load_dataset("synthetic-small", root=partitions[nproc].parent)
    book = load_partition(partitions[nproc])
    by_new_id = torch.from_numpy(np.asarray(dataset.x)[np.asarray(book.new_to_orig)])
    ranges = column_ranges(dataset.num_features, nproc)
    for rank, (start, stop) in enumerate(ranges):
        got = torch.load(f"{out}.{rank}")
        assert (got["start"], got["stop"]) == (start, stop)
        assert torch.equal(got["table"], by_new_id[:, start:stop]), rank
        assert got["batches"] > 0  # and its hybrid batches were the partitioned loader's


@pytest.mark.parametrize(
    ("model", "nproc", "fanouts"), [("sage", 2, "5,5"), ("gcn", 2, "5,5"), ("sage", 3, "5,5")]
)
def test_hybrid_epoch_on_parts_equals_partitioned_data_parallel_epoch(
    tmp_path, partitions, model, nproc, fanouts
):
    assert_hybrid_equals_data_parallel(tmp_path, nproc, partitions[nproc], model, fanouts)


def test_hybrid_on_parts_runs_a_part_without_training_nodes(tmp_path):
    dataset = multigraph()
    dataset.train_idx = dataset.train_idx[:1]
    stats = partition_dataset(dataset, 2, tmp_path / "parts")
    assert sorted(stats["train_nodes"]) == [0, 1]  # one worker's batches are all empty
    assert_hybrid_equals_data_parallel(tmp_path, 2, tmp_path / "parts", "sage", "3,3")


def assert_hybrid_equals_data_parallel(tmp_path, nproc, parts, model, fanouts) -> None:
    """An epoch of ``--parallel data`` and one of ``--parallel hybrid`` on partition ``parts``
    from the same weights and seeds end with the same parameters, loss, validation accuracy
    and sampled structure; hybrid moves no feature row."""
    out = tmp_path / "result.pt"
    result = torchrun(nproc, WORKER, "partitioned", out, parts, model, fanouts)
    assert result.returncode == 0, result.stderr[-3000:]
    runs = torch.load(out)
    data, hybrid = runs["data"], runs["hybrid"]
    assert (data["kind"], hybrid["kind"]) == ("PartitionedBatches", "HybridPartitionedBatches")
    assert data["state"].keys() == hybrid["state"].keys()
    for key, value in data["state"].items():
        torch.testing.assert_close(hybrid["state"][key], value, rtol=1e-4, atol=1e-6)
    assert hybrid["loss"] == pytest.approx(data["loss"], rel=1e-5)
    # The same evaluation batches (each worker its part's validation nodes, the same samples).
    assert hybrid["val_acc"] == data["val_acc"]
    for key in SAMPLED:  # the same batches sampled across the parts
        assert hybrid["partition"][key] == data["partition"][key] > 0, key
    # Sampling moved the same structure; data parallelism also fetched remote feature rows.
    sampled_bytes = data["partition"]["sampling_sent_bytes"]
    assert hybrid["partition"]["remote_bytes"] == sampled_bytes > 0
    assert data["partition"]["remote_bytes"] > sampled_bytes
    traffic = hybrid["traffic"]
    assert traffic["feature_bytes"] == data["traffic"]["feature_bytes"]  # 1/N of N batches
    assert traffic["partial_sent_bytes"] > 0 and traffic["structure_sent_bytes"] > 0
    assert traffic["gradient_bytes"] < data["traffic"]["gradient_bytes"]  # no first layer


def test_hybrid_on_parts_refuses_a_remote_row_cache(partitions):
    command = [sys.executable, "-m", "graphengine", "train", "--partitions", partitions[2]]
    command += ["--nproc", "2", "--parallel", "hybrid", "--remote-cache", "5%"]
    done = subprocess.run(
        list(map(str, command)), capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert done.returncode == 2
    assert "--remote-cache caches other parts' feature rows for --parallel data" in done.stderr
