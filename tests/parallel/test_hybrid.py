"""Hybrid (P3) parallelism: the column split, the split first layers against PyG's own layers,
the shared structure, and 2- and 3-worker training against data parallelism."""

import json
import subprocess
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import torch
from torch_geometric.nn import MLP, GATConv, GCNConv, GINConv, SAGEConv

from graphengine import NeighborLoader
from graphengine.batch.blocks import Block, to_blocks
from graphengine.data.columns import FeatureColumns, column_ranges
from graphengine.datasets import SyntheticSpec, generate, load_dataset
from graphengine.loader.hybrid_loader import pack_first_layer, unpack_first_layer
from graphengine.nn.blocks import block_conv
from graphengine.nn.column_layers import ColumnSplitError, finish_of, split_first_layer
from tests.helpers.processes import (
    WORKERS,
    assert_killing_rank_1_stops_the_run,
    torchrun,
    train_command,
)

WORKER = WORKERS / "hybrid_worker.py"
REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("columns", "parts"), [(32, 2), (32, 3), (100, 3), (7, 7), (1024, 16), (5, 4)]
)
def test_column_ranges_are_complete_disjoint_and_balanced(columns, parts):
    ranges = column_ranges(columns, parts)
    covered = np.concatenate([np.arange(start, stop) for start, stop in ranges])
    assert np.array_equal(covered, np.arange(columns))  # in order: complete and disjoint
    widths = [stop - start for start, stop in ranges]
    assert max(widths) - min(widths) <= 1 and min(widths) >= 1


def test_more_workers_than_columns_is_an_error():
    with pytest.raises(ValueError, match="3 columns cannot be split across 4 workers"):
        column_ranges(3, 4)


def test_feature_columns_read_a_memory_mapped_table_a_chunk_at_a_time(tmp_path):
    table = np.random.default_rng(0).standard_normal((20_000, 100), dtype=np.float32)
    np.save(tmp_path / "x.npy", table)
    mapped = np.load(tmp_path / "x.npy", mmap_mode="r")
    chunk = 1 << 20
    tracemalloc.start()
    columns = FeatureColumns.from_table(mapped, 30, 55, chunk_bytes=chunk)
    held, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert torch.equal(columns.table, torch.from_numpy(table[:, 30:55]))
    assert columns.nbytes == table[:, 30:55].nbytes
    # measured: the slice is all that stays, one chunk of whole rows the most besides
    assert columns.nbytes <= held < columns.nbytes + 64 * 1024
    assert peak <= columns.nbytes + chunk + 64 * 1024
    ids = torch.tensor([5, 0, 19_999])
    assert torch.equal(columns.gather(ids), torch.from_numpy(table[[5, 0, 19_999], 30:55]))
    with pytest.raises(IndexError, match="20000"):
        columns.gather(torch.tensor([20_000]))


def test_feature_columns_reject_bad_ranges_and_truncated_files(tmp_path):
    table = np.ones((10, 4), dtype=np.float32)
    with pytest.raises(ValueError, match=r"columns \[3, 6\)"):
        FeatureColumns.from_table(table, 3, 6)
    np.save(tmp_path / "x.npy", table)
    mapped = np.load(tmp_path / "x.npy", mmap_mode="r")
    with open(tmp_path / "x.npy", "r+b") as f:
        f.truncate(f.seek(0, 2) - 40)
    with pytest.raises(ValueError, match="ends before row"):
        FeatureColumns.from_table(mapped, 0, 2)


@pytest.fixture(scope="module")
def batch():
    dataset = generate("t", SyntheticSpec(3000, 40_000, 10, 3, 1500, 300))
    loader = NeighborLoader(dataset, [6, 4, 3], batch_size=64, input_nodes=dataset.train_idx)
    return next(iter(loader))


def whole_block(batch) -> Block:
    n = batch.num_nodes
    rowptr = torch.zeros(n + 1, dtype=torch.int64)
    torch.cumsum(torch.bincount(batch.edge_index[1], minlength=n), 0, out=rowptr[1:])
    return Block(batch.edge_index, rowptr, n, n)


@pytest.mark.parametrize("whole", [False, True])
def test_shared_structure_round_trips_to_the_first_block(batch, whole):
    n_id, block = unpack_first_layer(pack_first_layer(batch, whole))
    expected = (
        whole_block(batch)
        if whole
        else to_blocks(batch.edge_index, batch.num_sampled_nodes, batch.num_sampled_edges)[0]
    )
    assert torch.equal(n_id, batch.n_id)
    assert torch.equal(block.edge_index, expected.edge_index)
    assert torch.equal(block.rowptr, expected.rowptr)
    assert (block.num_src, block.num_dst) == (expected.num_src, expected.num_dst)


LAYERS = {
    "sage-mean": lambda: SAGEConv(10, 6),
    "sage-sum": lambda: SAGEConv(10, 6, aggr="sum", root_weight=False),
    "gcn": lambda: GCNConv(10, 6),
    "gcn-plain": lambda: GCNConv(10, 6, normalize=False),
    "gcn-improved": lambda: GCNConv(10, 6, improved=True),
    "gin-mlp": lambda: GINConv(MLP([10, 6, 6], norm=None), eps=0.3),
    "gin-sequential": lambda: GINConv(
        torch.nn.Sequential(torch.nn.Linear(10, 6), torch.nn.ReLU(), torch.nn.Linear(6, 6))
    ),
}


@pytest.mark.parametrize("name", sorted(LAYERS))
@pytest.mark.parametrize("parts", [1, 2, 3])
def test_split_layers_sum_to_pyg_s_own_layer(batch, name, parts):
    torch.manual_seed(0)
    conv = LAYERS[name]()
    whole = name.startswith("gcn") and conv.normalize
    block = (
        whole_block(batch)
        if whole
        else to_blocks(batch.edge_index, batch.num_sampled_nodes, batch.num_sampled_edges)[0]
    )
    x = batch.x.requires_grad_(False)
    expected = block_conv(conv, x, block)  # PyG's layer on all columns
    summed = sum(
        split_first_layer(conv, start, stop)(x[:, start:stop], block)
        for start, stop in column_ranges(x.shape[1], parts)
    )
    torch.testing.assert_close(finish_of(conv)(summed), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("conv", "match"),
    [
        (GATConv(10, 6), "GATConv cannot be split.*--parallel data"),
        (SAGEConv(10, 6, aggr="max"), "aggr='max'"),
        (SAGEConv(10, 6, normalize=True), "normalize=True"),
        (GINConv(torch.nn.Linear(10, 6), train_eps=True), "train_eps=True"),
    ],
)
def test_layers_that_do_not_split_by_columns_say_so(conv, match):
    with pytest.raises(ColumnSplitError, match=match):
        split_first_layer(conv, 0, 5)


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    """synthetic-small generated once, before workers open it."""
    path = tmp_path_factory.mktemp("data")
    load_dataset("synthetic-small", root=path)
    return path


@pytest.mark.parametrize(
    ("model", "nproc", "fanouts"),
    [
        ("sage", 2, "5,5"),
        ("sage", 2, "-1,-1"),
        ("gcn", 2, "5,5"),
        ("sage", 3, "5,5"),
        ("gcn", 3, "5,5"),
        ("gin", 3, "-1,-1"),
    ],
)
def test_hybrid_epoch_equals_data_parallel_epoch(tmp_path, root, model, nproc, fanouts):
    out = tmp_path / "result.pt"
    result = torchrun(nproc, WORKER, "exact", out, root, model, fanouts)
    assert result.returncode == 0, result.stderr[-3000:]
    runs = torch.load(out)
    data, hybrid = runs["data"], runs["hybrid"]
    assert data["state"].keys() == hybrid["state"].keys()
    for key, value in data["state"].items():
        torch.testing.assert_close(hybrid["state"][key], value, rtol=1e-4, atol=1e-6)
    assert hybrid["loss"] == pytest.approx(data["loss"], rel=1e-5)
    if fanouts == "-1,-1":  # every neighbor taken: evaluation batches made up otherwise agree
        assert hybrid["val_acc"] == data["val_acc"]
    traffic = hybrid["traffic"]
    assert traffic["feature_bytes"] == data["traffic"]["feature_bytes"]  # 1/N of N batches
    assert traffic["partial_sent_bytes"] > 0 and traffic["structure_sent_bytes"] > 0
    assert traffic["gradient_bytes"] < data["traffic"]["gradient_bytes"]  # no first layer


def test_each_hybrid_worker_holds_its_columns_of_every_row(tmp_path, root):
    out = tmp_path / "memory"
    result = torchrun(2, WORKER, "memory", out, root)
    assert result.returncode == 0, result.stderr[-3000:]
    reports = [json.loads(Path(f"{out}.{rank}").read_text()) for rank in range(2)]
    assert [(r["start"], r["stop"]) for r in reports] == column_ranges(32, 2)
    table = reports[0]["table_bytes"]
    assert sum(r["slice_bytes"] for r in reports) == table
    for report in reports:
        assert report["same"]
        assert report["mapped"] < table / 8  # after an epoch: the table itself was never read
        # measured by tracemalloc: what reading its columns leaves held is the slice
        assert report["slice_bytes"] <= report["held"] < report["slice_bytes"] + table / 16


def test_hybrid_refuses_a_model_it_cannot_split(tmp_path):
    command = train_command(tmp_path, 1, "--parallel", "hybrid", "--model", "gat")
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, cwd=REPO)
    assert done.returncode != 0
    assert "GATConv cannot be split by feature columns" in done.stderr
    assert "--parallel data" in done.stderr


def test_hybrid_needs_two_workers(tmp_path):
    command = train_command(tmp_path, 1, "--parallel", "hybrid")
    command[command.index("--nproc") + 1] = "1"
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, cwd=REPO)
    assert done.returncode == 2
    assert "--parallel hybrid needs 2 or more workers" in done.stderr


def test_hybrid_resume_continues_identically(tmp_path):
    def train(epochs, checkpoint, metrics):
        command = train_command(
            tmp_path, epochs, "--parallel", "hybrid", "--checkpoint", checkpoint,
            "--metrics", metrics, "--eval-every", "0", "--dropout", "0",
        )  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=240, cwd=REPO)
        assert done.returncode == 0, done.stderr[-3000:]
        return [json.loads(line)["loss"] for line in Path(metrics).read_text().splitlines()]

    straight = train(2, tmp_path / "a.pt", tmp_path / "a.jsonl")
    train(1, tmp_path / "b.pt", tmp_path / "b.jsonl")
    resumed = train(2, tmp_path / "b.pt", tmp_path / "b.jsonl")
    assert resumed == pytest.approx(straight, rel=1e-6)


def test_killed_hybrid_worker_stops_the_run_naming_its_rank(tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    command = train_command(
        tmp_path, 100000, "--parallel", "hybrid", "--metrics", metrics, "--dist-timeout", 20
    )
    assert_killing_rank_1_stops_the_run(command, metrics)
