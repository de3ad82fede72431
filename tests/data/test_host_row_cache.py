"""HostRowCache against a plain-Python SIEVE written from the paper's description, its
static policy, its boundary checks, its size helper and its use from several threads."""

from __future__ import annotations

import threading

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from graphengine.data.host_row_cache import HostRowCache, capacity_for

NUM_COLS = 3


def table_of(num_rows: int) -> torch.Tensor:
    """Rows that differ from each other in every column."""
    return torch.arange(num_rows * NUM_COLS, dtype=torch.float32).reshape(num_rows, NUM_COLS)


class SieveModel:
    """SIEVE as Zhang et al. (NSDI '24) describe it: one queue, new objects at its head; a hit
    sets the object's visited bit; to evict, the hand moves from the tail toward the head
    (back to the tail past the head), clearing visited bits, and evicts the first object not
    visited, then stays where that object was."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.queue: list[int] = []  # queue[0] is the head (newest), queue[-1] the tail
        self.visited: dict[int, bool] = {}
        self.hand: int | None = None  # the object the hand points at

    def lookup(self, ids: list[int]) -> list[int]:
        missing = []
        for position, key in enumerate(ids):
            if key in self.visited:
                self.visited[key] = True
            else:
                missing.append(position)
        return missing

    def insert(self, key: int) -> None:
        if key in self.visited or not self.capacity:
            return
        if len(self.queue) == self.capacity:
            self.evict()
        self.queue.insert(0, key)
        self.visited[key] = False

    def evict(self) -> None:
        index = self.queue.index(self.hand) if self.hand is not None else len(self.queue) - 1
        while self.visited[self.queue[index]]:
            self.visited[self.queue[index]] = False
            index = index - 1 if index > 0 else len(self.queue) - 1
        victim = self.queue[index]
        self.hand = self.queue[index - 1] if index > 0 else None
        self.queue.remove(victim)
        del self.visited[victim]

    def fill(self, ids: list[int]) -> int:
        fresh = [key for key in ids if key not in self.visited]
        fresh = fresh[: self.capacity - len(self.queue)]
        for key in reversed(fresh):  # the hottest (first) ends nearest the head
            self.insert(key)
        return len(fresh)


def ids_tensor(ids) -> torch.Tensor:
    return torch.tensor(list(ids), dtype=torch.int64)


NUM_ROWS = 12
distinct_ids = st.lists(st.integers(0, NUM_ROWS - 1), unique=True, max_size=NUM_ROWS)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("lookup"), st.lists(st.integers(0, NUM_ROWS - 1), max_size=16)),
        st.tuples(st.just("admit"), distinct_ids),
    ),
    max_size=25,
)


@settings(max_examples=150, deadline=None)
@given(capacity=st.integers(0, 8), seed=distinct_ids, ops=operations)
def test_sieve_matches_the_reference_model(capacity, seed, ops):
    table = table_of(NUM_ROWS)
    cache = HostRowCache(NUM_ROWS, capacity, NUM_COLS, torch.float32)
    model = SieveModel(capacity)
    assert cache.fill(ids_tensor(seed), table[ids_tensor(seed)]) == model.fill(seed)
    assert set(cache.cached_ids().tolist()) == set(model.queue)
    hits = lookups = 0
    for kind, ids in ops:
        if kind == "lookup":
            out = torch.full((len(ids), NUM_COLS), -1.0)
            missing = cache.lookup(ids_tensor(ids), out)
            expected_missing = model.lookup(ids)
            assert missing.dtype == torch.int64
            assert missing.tolist() == expected_missing
            found = [p for p in range(len(ids)) if p not in set(expected_missing)]
            assert torch.equal(out[found], table[ids_tensor(ids)[found]])
            assert bool((out[expected_missing] == -1).all())
            hits += len(found)
            lookups += len(ids)
        else:
            cache.admit(ids_tensor(ids), table[ids_tensor(ids)])
            for key in ids:
                model.insert(key)
        assert set(cache.cached_ids().tolist()) == set(model.queue)
        assert cache.stats()["rows"] == len(model.queue) <= capacity
    stats = cache.stats()
    assert (stats["hits"], stats["lookups"]) == (hits, lookups)


def test_admit_of_more_rows_than_fit_keeps_the_last_ones_with_their_rows():
    table = table_of(10)
    cache = HostRowCache(10, 3, NUM_COLS, torch.float32)
    cache.admit(ids_tensor(range(7)), table[:7])
    assert cache.cached_ids().tolist() == [4, 5, 6]
    out = torch.zeros(3, NUM_COLS)
    assert cache.lookup(ids_tensor([6, 4, 5]), out).numel() == 0
    assert torch.equal(out, table[[6, 4, 5]])
    assert cache.stats()["evicted"] == 4


def test_static_policy_keeps_what_fill_put():
    table = table_of(NUM_ROWS)
    cache = HostRowCache(NUM_ROWS, 4, NUM_COLS, torch.float32, policy="static")
    hottest = ids_tensor([9, 2, 7, 0, 5, 1])
    assert cache.fill(hottest, table[hottest]) == 4
    generator = torch.Generator().manual_seed(0)
    for _ in range(20):
        ids = torch.randint(0, NUM_ROWS, (8,), generator=generator)
        out = torch.zeros(8, NUM_COLS)
        missing = cache.lookup(ids, out)
        assert missing.tolist() == [p for p, i in enumerate(ids.tolist()) if i not in (9, 2, 7, 0)]
        fresh = ids[missing].unique()
        cache.admit(fresh, table[fresh])
        assert cache.cached_ids().tolist() == [0, 2, 7, 9]
    assert cache.stats()["evicted"] == 0


def test_capacity_zero_caches_nothing_and_holds_nothing():
    table = table_of(5)
    cache = HostRowCache(5, 0, NUM_COLS, torch.float32)
    assert cache.fill(ids_tensor([1, 2]), table[[1, 2]]) == 0
    cache.admit(ids_tensor([3]), table[[3]])
    out = torch.zeros(3, NUM_COLS)
    assert cache.lookup(ids_tensor([3, 1, 3]), out).tolist() == [0, 1, 2]
    assert cache.nbytes == 0
    assert cache.stats() | {"hit_rate": None} == {
        "rows": 0, "capacity": 0, "hits": 0, "lookups": 3, "hit_rate": None,
        "admitted": 0, "evicted": 0, "bytes": 0,
    }  # fmt: skip


def test_repeated_ids_in_a_lookup_each_get_the_row():
    table = table_of(6)
    cache = HostRowCache(6, 2, NUM_COLS, torch.float32)
    cache.admit(ids_tensor([4, 1]), table[[4, 1]])
    ids = ids_tensor([4, 4, 0, 1, 4, 0])
    out = torch.full((6, NUM_COLS), -1.0)
    assert cache.lookup(ids, out).tolist() == [2, 5]
    assert torch.equal(out[[0, 1, 3, 4]], table[[4, 4, 1, 4]])
    assert cache.stats()["hits"] == 4


def test_never_holds_more_than_capacity_rows():
    num_rows, capacity = 1000, 37
    table = table_of(num_rows)
    cache = HostRowCache(num_rows, capacity, NUM_COLS, torch.float32)
    nbytes = cache.nbytes
    generator = torch.Generator().manual_seed(1)
    for _ in range(50):
        ids = torch.randperm(num_rows, generator=generator)[:64]
        cache.lookup(ids, torch.empty(64, NUM_COLS))
        cache.admit(ids, table[ids])
        assert cache.stats()["rows"] == cache.cached_ids().numel() == capacity
    assert cache.nbytes == nbytes
    assert nbytes == capacity * (NUM_COLS * 4 + 8 + 1 + 4 + 4) + num_rows * 4


@settings(max_examples=100, deadline=None)
@given(
    budget=st.integers(0, 200_000),
    num_rows=st.integers(0, 3000),
    num_cols=st.integers(1, 64),
    dtype=st.sampled_from([torch.float32, torch.float16, torch.uint8]),
)
def test_capacity_for_fits_the_budget_and_no_more(budget, num_rows, num_cols, dtype):
    capacity = capacity_for(budget, num_rows, num_cols, dtype)
    assert 0 <= capacity <= num_rows
    if capacity:
        assert HostRowCache(num_rows, capacity, num_cols, dtype).nbytes <= budget
    if capacity < num_rows:
        assert HostRowCache(num_rows, capacity + 1, num_cols, dtype).nbytes > budget


def test_threads_doing_lookup_and_admit_never_get_a_wrong_row():
    num_rows, capacity, threads, rounds = 5000, 300, 4, 150
    table = torch.randn(num_rows, 16)
    cache = HostRowCache(num_rows, capacity, 16, torch.float32)
    errors: list[str] = []

    def load(seed: int) -> None:
        generator = torch.Generator().manual_seed(seed)
        for _ in range(rounds):
            # Skewed ids, so that threads hit and admit the same rows at once.
            ids = (torch.rand(400, generator=generator) ** 3 * num_rows).long()
            out = torch.full((400, 16), float("nan"))
            missing = cache.lookup(ids, out)
            hit = torch.ones(400, dtype=torch.bool)
            hit[missing] = False
            if not torch.equal(out[hit], table[ids[hit]]):
                errors.append(f"thread {seed}: a cached row differs from the table")
            fresh = ids[missing].unique()
            cache.admit(fresh, table[fresh])

    workers = [threading.Thread(target=load, args=(seed,)) for seed in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert errors == []
    held = cache.cached_ids()
    assert held.numel() == capacity
    out = torch.empty(capacity, 16)
    assert cache.lookup(held, out).numel() == 0
    assert torch.equal(out, table[held])
    assert cache.stats()["hits"] > 0


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda c, t: c.lookup(torch.tensor([1.0]), torch.empty(1, NUM_COLS)), TypeError, "int64"),
        (lambda c, t: c.lookup([1], torch.empty(1, NUM_COLS)), TypeError, "must be a tensor"),
        (lambda c, t: c.lookup(ids_tensor([[1]]), torch.empty(1, NUM_COLS)), TypeError, "1-D"),
        (lambda c, t: c.lookup(ids_tensor([8]), torch.empty(1, NUM_COLS)), IndexError, "id 8"),
        (lambda c, t: c.lookup(ids_tensor([-1]), torch.empty(1, NUM_COLS)), IndexError, "id -1"),
        (lambda c, t: c.lookup(ids_tensor([1]), torch.empty(2, NUM_COLS)), ValueError, "'out'"),
        (
            lambda c, t: c.lookup(ids_tensor([1]), torch.empty(1, NUM_COLS, dtype=torch.float64)),
            ValueError,
            "torch.float64",
        ),
        (lambda c, t: c.admit(ids_tensor([1, 1]), t[[1, 1]]), ValueError, "distinct"),
        (lambda c, t: c.admit(ids_tensor([1, 2]), t[[1]]), ValueError, "shape (2, 3)"),
        (lambda c, t: c.admit(ids_tensor([1]), t[[1]].half()), ValueError, "torch.float16"),
        (lambda c, t: c.admit(ids_tensor([9]), t[[1]]), IndexError, "[0, 8)"),
        (lambda c, t: c.fill(ids_tensor([2, 2]), t[[2, 2]]), ValueError, "distinct"),
        (lambda c, t: c.fill(ids_tensor([2]), t[:, :2][[2]]), ValueError, "'rows'"),
    ],
)
def test_bad_input_is_a_clear_error(call, error, words):
    cache = HostRowCache(8, 4, NUM_COLS, torch.float32)
    with pytest.raises(error) as raised:
        call(cache, table_of(8))
    assert words in str(raised.value)
    assert cache.stats()["rows"] == 0


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"capacity": 9}, ValueError, "more than the table's 8 rows"),
        ({"capacity": -1}, ValueError, "'capacity'"),
        ({"capacity": 2**31, "num_rows": 2**31}, ValueError, "'capacity' 2147483648"),
        ({"num_rows": -1}, ValueError, "'num_rows' must be an int >= 0 (got -1)"),
        ({"num_rows": True}, ValueError, "'num_rows' must be an int >= 0 (got True)"),
        ({"num_rows": 8.0}, ValueError, "'num_rows' must be an int >= 0 (got 8.0)"),
        ({"num_cols": 0}, ValueError, "'num_cols'"),
        ({"dtype": "float32"}, TypeError, "torch.dtype"),
        ({"policy": "lru"}, ValueError, "sieve, static"),
    ],
)
def test_bad_construction_is_a_clear_error(kwargs, error, words):
    arguments = {"num_rows": 8, "capacity": 4, "num_cols": NUM_COLS, "dtype": torch.float32}
    policy = kwargs.pop("policy", "sieve")
    with pytest.raises(error) as raised:
        HostRowCache(**(arguments | kwargs), policy=policy)
    assert words in str(raised.value)


def test_capacity_for_refuses_bad_sizes():
    with pytest.raises(ValueError, match="'budget_bytes'"):
        capacity_for(-1, 10, 4, torch.float32)
    with pytest.raises(ValueError, match="'num_cols'"):
        capacity_for(100, 10, 0, torch.float32)
    with pytest.raises(TypeError, match=r"torch\.dtype"):
        capacity_for(100, 10, 4, "float32")


def test_capacity_for_never_exceeds_what_int32_slots_address():
    # 2**32 one-byte rows and a budget for all of them: more rows than int32 slots address.
    rows = 2**32
    assert capacity_for(rows * (4 + 1 + 17), rows, 1, torch.uint8) == 2**31 - 1


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.uint8, torch.float64])
@pytest.mark.parametrize("contiguous_out", [True, False])
def test_rows_of_any_dtype_come_back_whole_into_any_out(dtype, contiguous_out):
    num_rows, num_cols = 50, 5  # 5 columns: rows of an odd number of bytes for uint8
    table = (torch.arange(num_rows * num_cols) % 251).reshape(num_rows, num_cols).to(dtype)
    cache = HostRowCache(num_rows, 20, num_cols, dtype)
    hottest = ids_tensor(range(49, 29, -1))
    cache.fill(hottest, table[hottest])
    cache.admit(ids_tensor([3, 7]), table[[3, 7]])
    ids = ids_tensor([7, 40, 1, 3, 49])
    wide = torch.zeros(len(ids), num_cols + 2, dtype=dtype)
    out = torch.zeros(len(ids), num_cols, dtype=dtype) if contiguous_out else wide[:, 1:-1]
    assert out.is_contiguous() == contiguous_out
    assert cache.lookup(ids, out).tolist() == [2]
    assert torch.equal(out[[0, 1, 3, 4]], table[[7, 40, 3, 49]])
    assert bool((out[2] == 0).all())
    if not contiguous_out:
        assert bool((wide[:, [0, -1]] == 0).all())
