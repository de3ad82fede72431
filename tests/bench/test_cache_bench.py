"""bench cache: its LRU reference against a plain-Python LRU, and the replay's bounds (a cache
of every row, of none)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from graphengine.bench import cache_policy

NUM_ROWS = 10


def lru_model(capacity: int, batches: list[list[int]]) -> list[int]:
    """Misses per batch of an LRU that sees a batch's ids used in their order, then admits
    the batch's misses (its last ``capacity`` ones) in place of the least recent rows;
    ``order`` holds the cached ids, least recent first."""
    order: list[int] = []
    misses = []
    for ids in batches:
        missed = [i for i in ids if i not in order]
        misses.append(len(missed))
        admitted = missed[max(len(missed) - capacity, 0) :] if capacity else []
        held = [i for i in order if i not in ids] + [i for i in ids if i in order]
        kept = held[max(len(held) + len(admitted) - capacity, 0) :]
        recent = [i for i in ids if i in kept or i in admitted]
        order = [i for i in kept if i not in ids] + recent
    return misses


@settings(max_examples=100, deadline=None)
@given(
    capacity=st.integers(0, NUM_ROWS),
    batches=st.lists(st.lists(st.integers(0, NUM_ROWS - 1), unique=True), max_size=12),
)
def test_batch_lru_misses_what_a_plain_lru_misses(capacity, batches):
    lru = cache_policy.BatchLru(NUM_ROWS, capacity)
    misses = [lru.lookup_and_admit(np.array(ids, dtype=np.int64)) for ids in batches]
    assert misses == lru_model(capacity, batches)
    assert lru.cached.sum() == lru.held <= capacity


def test_a_cache_of_every_row_misses_only_first_touches_and_of_none_everything(tmp_path):
    summary = cache_policy.run(
        "synthetic-papers-s12", str(tmp_path), [5, 5], 64, batches=4, sizes=["100%", 0]
    )
    rates = {(r["policy"], r["size"]): r for r in summary["results"]}
    assert rates["static", "100%"]["hit_rate"] == rates["sieve-degree", "100%"]["hit_rate"] == 1
    cold = rates["sieve-cold", "100%"]
    assert 0 < cold["hit_rate"] < 1
    assert cold == rates["lru", "100%"] | {"policy": "sieve-cold"}
    for policy in cache_policy.POLICIES:
        assert rates[policy, "0"]["hit_rate"] == 0
        assert rates[policy, "0"]["missed_rows_per_batch"] == summary["rows_per_batch"]
