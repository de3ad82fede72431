"""Feature rows read from disk through a host row cache (``DiskTable``), and the plan that
chooses it: rows equal NumPy's indexing of the file for any ids, with or without a cache, in
several threads at once; the cache never holds more than its budget; a store routes its
gathers there."""

import threading

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from graphengine.data.disk_table import DiskTable
from graphengine.data.feature_store import FeatureStore
from graphengine.data.out_of_core import MIN_TRAINING_BYTES, local_workers, plan_features

NUM_ROWS, NUM_COLS = 500, 6
GIB = 1 << 30


@pytest.fixture(scope="module", params=["float32", "float16", "int64"])
def table_file(request, tmp_path_factory):
    rng = np.random.default_rng(0)
    values = rng.normal(size=(NUM_ROWS, NUM_COLS)) * 100
    path = tmp_path_factory.mktemp("table") / f"x-{request.param}.npy"
    np.save(path, values.astype(request.param))
    return path


def expected_rows(path, ids):
    return torch.from_numpy(np.load(path, mmap_mode="r")[np.asarray(ids, dtype=np.int64)])


@settings(max_examples=30, deadline=None)
@given(
    ids=st.lists(st.integers(0, NUM_ROWS - 1), max_size=200),
    cache_rows=st.sampled_from([0, 1, 37, NUM_ROWS]),
    policy=st.sampled_from(["sieve", "static"]),
    ranked=st.booleans(),
)
def test_rows_equal_numpys_indexing_with_any_cache(table_file, ids, cache_rows, policy, ranked):
    ranking = np.random.default_rng(len(ids)).random(NUM_ROWS) if ranked else None
    table = DiskTable(table_file, cache_rows=cache_rows, ranking=ranking, policy=policy)
    ids = torch.tensor(ids, dtype=torch.int64)
    for _ in range(2):  # the second pass finds what the first one admitted
        assert torch.equal(table.gather(ids), expected_rows(table_file, ids))
    assert table.cache.stats()["rows"] <= cache_rows
    table.close()


@pytest.mark.parametrize("order", ["sorted", "reversed", "repeated", "empty"])
def test_rows_for_sorted_reversed_repeated_and_no_ids(table_file, order):
    ids = {
        "sorted": torch.arange(0, NUM_ROWS, 3),
        "reversed": torch.arange(NUM_ROWS - 1, -1, -2),
        "repeated": torch.tensor([4, 4, 9, 4, 9, 0, 0]),
        "empty": torch.empty(0, dtype=torch.int64),
    }[order]
    with_cache = DiskTable(table_file, cache_rows=50, ranking=np.arange(NUM_ROWS))
    for ids_dtype in (torch.int32, torch.int64):
        out = torch.full((ids.shape[0], NUM_COLS), -7, dtype=with_cache.dtype)
        assert with_cache.gather(ids.to(ids_dtype), out) is out
        assert torch.equal(out, expected_rows(table_file, ids))


def test_the_cache_is_seeded_with_the_highest_ranked_rows_and_stays_within_budget(table_file):
    ranking = np.zeros(NUM_ROWS)
    ranking[[7, 300, 41]] = [3.0, 2.0, 1.0]
    table = DiskTable(table_file, cache_rows=3, ranking=ranking)
    seeded = table.stats()
    assert seeded["rows_read"] == 3 and seeded["rows"] == 3
    table.gather(torch.tensor([300, 7, 41]))
    stats = table.stats()
    assert (stats["hits"], stats["lookups"], stats["rows_read"]) == (3, 3, 3)
    table.gather(torch.arange(100, 200))  # misses, each admitted in turn
    stats = table.stats()
    assert stats["rows"] <= 3 and stats["rows_read"] == 103
    assert stats["bytes_read"] >= 100 * NUM_COLS * table.dtype.itemsize


def test_threads_gathering_at_once_get_their_own_rows(table_file):
    table = DiskTable(table_file, cache_rows=40, ranking=np.arange(NUM_ROWS))
    failures = []

    def gather(seed):
        rng = np.random.default_rng(seed)
        for _ in range(20):
            ids = torch.from_numpy(rng.integers(0, NUM_ROWS, 64))
            if not torch.equal(table.gather(ids), expected_rows(table_file, ids)):
                failures.append(seed)

    threads = [threading.Thread(target=gather, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures
    assert table.stats()["gathers"] == 80


def test_an_id_out_of_range_is_an_index_error_before_any_read(table_file):
    table = DiskTable(table_file, cache_rows=10)
    with pytest.raises(IndexError, match=f"id {NUM_ROWS} at position 1"):
        table.gather(torch.tensor([0, NUM_ROWS]))
    with pytest.raises(IndexError, match="id -1"):
        table.gather(torch.tensor([-1]))
    assert table.stats()["rows_read"] == 0


@pytest.mark.parametrize(
    "ids",
    [
        torch.tensor([1.7]),
        torch.tensor([1.0, 2.0], dtype=torch.float64),
        torch.tensor([True]),
        torch.tensor([[1, 2]]),
        [1, 2],
        np.array([1, 2]),
    ],
)
def test_ids_that_are_not_a_1d_integer_tensor_are_a_type_error(table_file, ids):
    table = DiskTable(table_file, cache_rows=10)
    kind = ids.dtype if isinstance(ids, torch.Tensor) else type(ids).__name__
    with pytest.raises(TypeError, match=rf"DiskTable\.gather: 'ids' must be .*got {kind}"):
        table.gather(ids)
    assert table.stats()["rows_read"] == 0
    assert table.stats()["gathers"] == 0


def test_a_store_gathers_a_table_read_from_disk_through_it(table_file, tmp_path):
    mapped = np.load(table_file, mmap_mode="r")
    store = FeatureStore({"x": mapped})
    table = DiskTable(table_file, cache_rows=20, ranking=np.arange(NUM_ROWS))
    store.read_from_disk_("x", table)
    ids = torch.tensor([3, 499, 3, 0])
    assert store.reads_from_disk("x")
    assert torch.equal(store.gather("x", ids), expected_rows(table_file, ids))
    assert store.cache_stats("x")["lookups"] == 4
    assert store["x"] is not None and store.cache_device("x") is None
    with pytest.raises(ValueError, match="read from disk through a host row cache already"):
        store.enable_cache("x", 0.5, np.arange(NUM_ROWS), "cpu")
    in_memory = FeatureStore({"x": np.array(mapped)})
    with pytest.raises(ValueError, match="not a memory-mapped file"):
        in_memory.read_from_disk_("x", table)
    other = tmp_path / "other.npy"
    np.save(other, np.zeros((NUM_ROWS, NUM_COLS), dtype=mapped.dtype))
    with pytest.raises(ValueError, match="but the disk table reads"):
        FeatureStore({"x": np.load(other, mmap_mode="r")}).read_from_disk_("x", table)


def test_the_plan_reads_from_disk_only_what_does_not_fit():
    fits = plan_features(3 * GIB, 1 * GIB, limit=16 * GIB, in_use=GIB)
    assert not fits.from_disk and fits.cache_bytes == 0 and "memory-mapped" in fits.reason
    large = plan_features(8 * GIB, 1 * GIB, limit=10 * GIB, in_use=GIB)
    # 8 GiB left after the process and the graph: half kept for training, half the cache.
    assert large.from_disk and large.cache_bytes == 4 * GIB
    assert "row cache" in large.reason
    tight = plan_features(8 * GIB, GIB, limit=2 * GIB, in_use=GIB // 2)
    assert tight.from_disk and tight.cache_bytes == 0  # nothing left beyond training's share
    assert plan_features(8 * GIB, GIB, limit=None, in_use=0).from_disk is False
    assert plan_features(0, GIB, limit=GIB, in_use=0).from_disk is False
    shared = plan_features(8 * GIB, 1 * GIB, limit=10 * GIB, in_use=GIB // 2, workers=2)
    # 8 GiB left after two workers and the graph: half kept, the rest split between them.
    assert shared.cache_bytes == 2 * GIB and "in each of 2 workers" in shared.reason


@settings(max_examples=100, deadline=None)
@given(
    feature=st.integers(1, 1 << 40),
    graph=st.integers(0, 1 << 38),
    limit=st.integers(1, 1 << 40),
    in_use=st.integers(0, 1 << 36),
    workers=st.integers(1, 8),
)
def test_the_cache_budget_leaves_training_its_share(feature, graph, limit, in_use, workers):
    plan = plan_features(feature, graph, limit, in_use, workers)
    assert plan.from_disk == (feature + graph > limit / 2)
    assert 0 <= plan.cache_bytes <= feature
    if plan.cache_bytes:
        each = in_use + plan.cache_bytes + MIN_TRAINING_BYTES
        assert graph + workers * each <= limit


@pytest.mark.parametrize(("value", "workers"), [(None, 1), ("", 1), ("1", 1), ("4", 4), (" 3 ", 3)])
def test_local_workers_reads_local_world_size(monkeypatch, value, workers):
    if value is None:
        monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    else:
        monkeypatch.setenv("LOCAL_WORLD_SIZE", value)
    assert local_workers() == workers


@pytest.mark.parametrize("value", ["0", "-2", "two", "1.5"])
def test_a_local_world_size_not_a_positive_integer_is_refused(monkeypatch, value):
    monkeypatch.setenv("LOCAL_WORLD_SIZE", value)
    with pytest.raises(
        ValueError, match=rf"\$LOCAL_WORLD_SIZE must be a positive integer.*'{value}'"
    ):
        local_workers()
