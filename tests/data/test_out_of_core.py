"""Training from a store on disk: the same batches from the memory map as from memory, page
faults and bytes read counted, read-ahead advice that changes what is read, and a host feature
cache that serves hot rows without changing a step."""

import os

import numpy as np
import pytest
import torch
from torch_geometric.nn import GraphSAGE

from graphengine import NeighborLoader, ops
from graphengine.data.disk_io import IoCounters, advise
from graphengine.datasets import GraphDataset, SyntheticSpec, generate, load_dataset
from graphengine.datasets.papers import PapersSpec, write_papers
from graphengine.datasets.reorder import original_ids, reorder_dataset
from graphengine.train import evaluate
from graphengine.train.evaluate import resolve_eval_mode
from graphengine.train.trainer import Trainer


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("store") / "papers"
    write_papers(PapersSpec(13), path)
    return path


def test_mapped_store_gives_the_batches_of_the_store_in_memory(store):
    mapped, in_memory = GraphDataset.load(store), GraphDataset.load(store, mmap=False)
    assert isinstance(mapped.x, np.memmap) and not isinstance(in_memory.x, np.memmap)
    batches = [
        list(
            NeighborLoader(d, [10, 5], batch_size=16, input_nodes=d.train_idx, shuffle=True, seed=3)
        )
        for d in (mapped, in_memory)
    ]
    assert len(batches[0]) == len(batches[1]) > 1
    for ours, theirs in zip(*batches, strict=True):
        assert torch.equal(ours.n_id, theirs.n_id)
        assert torch.equal(ours.edge_index, theirs.edge_index)
        assert torch.equal(ours.x, theirs.x) and torch.equal(ours.y, theirs.y)


def evicted_file(path, size):
    """``path`` of ``size`` random bytes, written, synced and dropped from the page cache."""
    path.write_bytes(np.random.default_rng(0).bytes(size))
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
    return path


def read_strided(path, access, stride=2**16):
    """Bytes read from disk and major faults to touch one byte every ``stride`` of ``path``."""
    array = np.load(path, mmap_mode="r") if path.suffix == ".npy" else np.memmap(path, mode="r")
    if access is not None:
        assert advise(array, access)
    before = IoCounters.now()
    int(array[::stride].sum())
    return IoCounters.now().since(before)


def test_counters_see_faults_and_reads_and_random_access_reads_less(tmp_path):
    if IoCounters.now().read_bytes is None:
        pytest.skip("/proc/self/io is not readable here")
    size = 16 * 2**20
    normal = read_strided(evicted_file(tmp_path / "a.bin", size), "normal")
    if normal["read_bytes"] == 0:
        pytest.skip("the page cache cannot be dropped on this file system (tmpfs?)")
    assert normal["major_faults"] >= 1
    random = read_strided(evicted_file(tmp_path / "b.bin", size), "random")
    touched = size // 2**16 * 4096  # one page per stride
    assert touched <= random["read_bytes"] < normal["read_bytes"] / 2


def test_advise_needs_a_memory_map_and_a_known_access(store):
    dataset = GraphDataset.load(store)
    assert dataset.advise("random") == ["x", "indices", "indptr"]
    assert GraphDataset.load(store, mmap=False).advise("random") == []
    assert not advise(np.zeros(4), "random")
    with pytest.raises(ValueError, match=r"'access' must be one of .* \(got 'often'\)"):
        advise(dataset.x, "often")


def train_one_epoch(dataset, **options):
    torch.manual_seed(0)
    model = GraphSAGE(dataset.num_features, 32, 2, dataset.num_classes)
    trainer = Trainer(
        model, dataset, [5, 5], batch_size=32, progress=False, eval_mode="sampled", **options
    )
    return trainer.train_epoch(), model


def test_feature_cache_serves_hot_rows_without_changing_training(store):
    dataset = GraphDataset.load(store)
    cached, cached_model = train_one_epoch(dataset, feature_cache="10%")
    plain, plain_model = train_one_epoch(dataset)
    assert cached["loss"] == plain["loss"]
    for ours, theirs in zip(cached_model.parameters(), plain_model.parameters(), strict=True):
        assert torch.equal(ours, theirs)
    stats = cached["feature_cache"]
    assert stats["rows"] == dataset.num_nodes // 10 and stats["policy"] == "in-degree"
    assert stats["lookups"] == cached["traffic"]["feature_bytes"] // (dataset.num_features * 4)
    # High in-degree nodes are what sampling reaches: far more hits than the cached share.
    assert 0.2 < stats["hit_rate"] < 1.0
    assert set(cached["io"]) == {"major_faults", "minor_faults", "read_bytes"}
    assert "feature_cache" not in plain
    with pytest.raises(ValueError, match="'feature_cache' must be rows"):
        train_one_epoch(dataset, feature_cache="lots")


def test_auto_evaluation_samples_when_few_nodes_are_evaluated(store, monkeypatch):
    papers_like = GraphDataset.load(store)  # validation and test: 0.3% of the nodes
    products_like = generate("t", SyntheticSpec(2000, 20_000, 8, 3, 200, 200))
    model = GraphSAGE(8, 32, 2, 3)
    assert resolve_eval_mode("auto", papers_like, model) == "full"  # small: the whole graph
    monkeypatch.setattr(evaluate, "FULL_EVAL_MAX_EDGES", 0)
    assert resolve_eval_mode("auto", papers_like, model) == "sampled"
    assert resolve_eval_mode("auto", products_like, model) == "layerwise"


def test_degree_order_gives_the_same_model_outputs_mapped_back(store, tmp_path):
    original = GraphDataset.load(store)
    reordered = reorder_dataset(original, tmp_path / "degree")
    order = original_ids(tmp_path / "degree")
    assert original_ids(store) is None
    degree = reordered.graph.in_degree()
    assert (np.diff(degree) <= 0).all() and degree.sum() == original.graph.num_edges
    assert np.array_equal(reordered.x, original.x[order])
    assert np.array_equal(reordered.y, original.y[order])
    for split in ("train", "val", "test"):
        assert np.array_equal(np.sort(order[reordered.split(split)]), original.split(split))
    torch.manual_seed(0)
    model = GraphSAGE(original.num_features, 16, 2, original.num_classes).eval()
    with torch.no_grad():
        expected = model(torch.from_numpy(np.asarray(original.x)), original.graph.to_edge_index())
        got = model(torch.from_numpy(np.asarray(reordered.x)), reordered.graph.to_edge_index())
    assert torch.allclose(got, expected[torch.from_numpy(np.asarray(order))], atol=1e-5)
    assert load_dataset(str(tmp_path / "degree")).num_nodes == original.num_nodes
    with pytest.raises(ValueError, match=r"'order' must be one of \('degree',\)"):
        reorder_dataset(original, tmp_path / "bfs", order="bfs")


def test_random_access_prefetches_each_gathers_rows(store):
    dataset = GraphDataset.load(store)
    assert dataset.advise("random") and dataset.access == "random"
    features = dataset.feature_store()
    plain = GraphDataset.load(store, mmap=False).feature_store()
    assert not plain.prefetch_("x")  # in memory: nothing to read
    ids = torch.from_numpy(np.random.default_rng(0).choice(dataset.num_nodes, 300, replace=False))
    fd = os.open(store / "x.npy", os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
    before = IoCounters.now()
    rows = features.gather("x", ids)
    read = IoCounters.now().since(before)
    assert torch.equal(rows, plain.gather("x", ids))
    if read["read_bytes"]:  # where the page cache could be dropped: the rows' pages, no more
        assert read["read_bytes"] <= 300 * 2 * 4096
    # One range per run of adjacent pages (the rows' addresses: 512 bytes each).
    table = torch.from_numpy(np.asarray(dataset.x))
    start = table.data_ptr() + ids.numpy().astype(np.int64) * 512
    pages = np.unique(np.concatenate([start // 4096, (start + 511) // 4096]))
    assert ops.prefetch_rows(table, ids) == 1 + int((np.diff(pages) > 1).sum())
