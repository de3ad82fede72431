"""A store larger than the memory a process may use has its features read from disk through a
host row cache, chosen with no flag: the same batches and the same trained parameters as the
memory-mapped store, the cache's counts in each epoch's metrics, and the same parameters from a
run inside a memory cgroup."""

import json
import sys

import pytest
import torch
from torch_geometric.nn import GraphSAGE

from graphengine import NeighborLoader
from graphengine.bench import cgroup
from graphengine.data import out_of_core
from graphengine.datasets import GraphDataset
from graphengine.datasets.dataset import choose_feature_reads
from graphengine.datasets.papers import PapersSpec, write_papers
from graphengine.train.trainer import Trainer


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("store") / "papers"
    write_papers(PapersSpec(13), path)
    return path


def limited_to(monkeypatch, limit_bytes):
    """Make this process's memory limit ``limit_bytes`` for the plan."""
    monkeypatch.setattr(out_of_core, "memory_limit", lambda: limit_bytes)
    monkeypatch.setattr(out_of_core, "resident_bytes", lambda: 0)


def train_one_epoch(dataset):
    torch.manual_seed(0)
    model = GraphSAGE(dataset.num_features, 32, 2, dataset.num_classes)
    trainer = Trainer(
        model, dataset, [5, 5], batch_size=64, progress=False, eval_mode="sampled", num_workers=2
    )
    return trainer.train_epoch(), model


def test_a_store_larger_than_memory_is_read_from_disk_with_no_flag(store, monkeypatch):
    dataset = GraphDataset.load(store)
    store_bytes = dataset.x.nbytes + dataset.graph.indices.nbytes + dataset.graph.indptr.nbytes
    limited_to(monkeypatch, store_bytes)  # the store takes all of it: more than half
    assert dataset.reads_from_disk()
    options = dataset.disk_options()
    assert options["enabled"] and options["policy"] == "static" and options["cache_bytes"] >= 0
    table = dataset.disk_table()
    assert dataset.feature_store().reads_from_disk("x")
    assert dataset.disk_table() is table  # one cache for every store of the dataset

    roomy = GraphDataset.load(store)
    limited_to(monkeypatch, 4 * store_bytes)
    assert not roomy.reads_from_disk() and roomy.disk_table() is None
    assert not roomy.feature_store().reads_from_disk("x")


def test_batches_read_from_disk_equal_the_memory_mapped_ones(store):
    mapped, from_disk = GraphDataset.load(store), GraphDataset.load(store)
    mapped.read_from_disk(False)
    from_disk.read_from_disk(cache_bytes=50 * from_disk.num_features * 4)
    batches = [
        list(
            NeighborLoader(d, [10, 5], batch_size=32, input_nodes=d.train_idx, shuffle=True, seed=3)
        )
        for d in (mapped, from_disk)
    ]
    assert len(batches[0]) == len(batches[1]) > 1
    for ours, theirs in zip(*batches, strict=True):
        assert torch.equal(ours.n_id, theirs.n_id)
        assert torch.equal(ours.x, theirs.x) and torch.equal(ours.y, theirs.y)
    stats = from_disk.disk_table().stats()
    assert stats["rows_read"] > 0 and stats["hits"] > 0 and stats["rows"] <= 50


@pytest.mark.parametrize("policy", ["sieve", "static"])
def test_training_from_disk_gives_the_parameters_of_the_memory_map(store, policy):
    mapped, from_disk = GraphDataset.load(store), GraphDataset.load(store)
    mapped.read_from_disk(False)
    from_disk.read_from_disk(cache_bytes=800 * from_disk.num_features * 4, policy=policy)
    ours, our_model = train_one_epoch(from_disk)
    theirs, their_model = train_one_epoch(mapped)
    assert ours["loss"] == theirs["loss"]
    for a, b in zip(our_model.parameters(), their_model.parameters(), strict=True):
        assert torch.equal(a, b)
    cache = ours["feature_cache"]
    assert cache["policy"] == policy and cache["lookups"] > 0 and cache["rows"] == 800
    assert cache["rows_read"] > 0 and cache["bytes_read"] > 0 and 0 < cache["hit_rate"] < 1
    assert "feature_cache" not in theirs


def test_reading_from_disk_needs_a_memory_mapped_store(store):
    in_memory = GraphDataset.load(store, mmap=False)
    with pytest.raises(ValueError, match="not a memory-mapped file"):
        in_memory.read_from_disk()
    with pytest.raises(ValueError, match="'cache_bytes' must be an int >= 0"):
        GraphDataset.load(store).read_from_disk(cache_bytes=-1)
    with pytest.raises(ValueError, match="'policy' must be one of"):
        GraphDataset.load(store).read_from_disk(policy="lru")
    with pytest.raises(ValueError, match="'reads' must be one of"):
        choose_feature_reads(GraphDataset.load(store), "page-faults", "sieve")


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"enabled": "no"}, TypeError, "'enabled' must be True or False (got 'no')"),
        ({"enabled": 1}, TypeError, "'enabled' must be True or False (got 1)"),
        ({"enabled": None}, TypeError, "'enabled' must be True or False (got None)"),
        ({"engine": "aio"}, ValueError, "'engine' must be one of ('auto', 'io_uring', 'pread'"),
        (
            {"direct": "yes"},
            ValueError,
            "'direct' must be one of (True, False, 'auto') (got 'yes')",
        ),
        ({"direct": 1}, ValueError, "'direct' must be one of (True, False, 'auto') (got 1)"),
        ({"enabled": False, "engine": None}, ValueError, "'engine' must be one of"),
    ],
)
def test_bad_read_options_are_refused_at_the_call(store, kwargs, error, words):
    dataset = GraphDataset.load(store)
    dataset.read_from_disk(False)
    with pytest.raises(error) as raised:
        dataset.read_from_disk(**kwargs)
    assert words in str(raised.value)
    # The refused call changed nothing: no row file was opened, the earlier choice stands.
    assert dataset.disk_options()["enabled"] is False
    assert dataset.disk_table() is None


_CHILD = """
import json, sys, torch
from torch_geometric.nn import GraphSAGE
from graphengine.datasets import GraphDataset
from graphengine.train.trainer import Trainer
dataset = GraphDataset.load(sys.argv[1])
dataset.read_from_disk()  # the cache sized from this cgroup's limit
torch.manual_seed(0)
model = GraphSAGE(dataset.num_features, 32, 2, dataset.num_classes)
trainer = Trainer(model, dataset, [5, 5], batch_size=64, progress=False, eval_mode="sampled",
                  num_workers=2)
metrics = trainer.train_epoch()
torch.save(model.state_dict(), sys.argv[2])
print(json.dumps({"cache": metrics["feature_cache"], "options": dataset.disk_options()}))
"""


def test_training_in_a_memory_cgroup_gives_the_unlimited_parameters(store, tmp_path):
    missing = cgroup.unavailable()
    if missing is not None:
        pytest.skip(missing)
    limit = 1536 << 20
    params = tmp_path / "params.pt"
    ran = cgroup.run_limited(
        [sys.executable, "-c", _CHILD, str(store), str(params)], limit, timeout_s=300
    )
    assert ran.returncode == 0 and ran.oom_kills == 0, ran.stdout
    assert ran.peak_bytes <= limit
    child = json.loads(ran.stdout.splitlines()[-1])
    # The whole 4 MB table fits the budget the cgroup's limit leaves: all of it cached.
    assert 0 < child["options"]["cache_bytes"] < limit
    assert child["cache"]["hit_rate"] == 1.0 and child["cache"]["lookups"] > 0
    mapped = GraphDataset.load(store)
    mapped.read_from_disk(False)
    _, model = train_one_epoch(mapped)
    limited = torch.load(params)
    for name, value in model.state_dict().items():
        assert torch.equal(value, limited[name]), name
