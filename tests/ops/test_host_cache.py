"""The host cache: torch's large CPU blocks reused within graphengine's loader and Trainer spans."""

import subprocess
import sys
import threading

import pytest
import torch
from torch_geometric.data import Data

from graphengine import NeighborLoader, ops
from graphengine.runtime import (
    host_memory_cache,
    host_memory_cache_state,
    set_host_memory_cache,
)

BIG = 3_000_000  # float32 elements: 12 MB, above the 4 MB the cache starts at


@pytest.fixture(scope="module", autouse=True)
def extension():
    if not ops.build_extension():
        pytest.fail("the extension did not build on this machine")


@pytest.fixture
def cache_on():
    previous = set_host_memory_cache(True)
    yield
    set_host_memory_cache(previous)


def run_fresh(script: str) -> str:
    """``script`` in a fresh Python process (no buffers freed by earlier tests in its pool)."""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_spans_reuse_freed_blocks_and_give_them_back_at_the_end():
    out = run_fresh(
        f"""
import torch
from graphengine.runtime import host_memory_cache, host_memory_cache_state
outside = torch.ones({BIG})
address = outside.data_ptr()
del outside
with host_memory_cache() as active:
    assert active
    first = torch.full(({BIG},), 2.0)
    cached_address = first.data_ptr()
    del first
    spans, cached, fresh = host_memory_cache_state()
    assert spans == 1 and cached >= {BIG} * 4
    second = torch.zeros({BIG} - 1000)  # a slightly smaller block fits the cached one
    assert second.data_ptr() == cached_address, "the freed block was not reused"
    assert host_memory_cache_state()[2] == fresh  # nothing new taken from the system
    assert float(second.abs().sum()) == 0.0
    kept = torch.arange({BIG}, dtype=torch.float32)
assert host_memory_cache_state()[:2] == (0, 0)  # the cached blocks went back to the system
assert float(kept[-1]) == {BIG} - 1  # a tensor outliving its span stays valid
del kept
print("ok")
"""
    )
    assert out.strip() == "ok"


def test_turned_off_spans_do_not_cache(cache_on):
    set_host_memory_cache(False)
    with host_memory_cache() as active:
        assert not active
        assert host_memory_cache_state()[0] == 0
        block = torch.ones(BIG)
        del block
    set_host_memory_cache(True)
    with host_memory_cache() as active, host_memory_cache() as nested:
        assert active and nested
        assert host_memory_cache_state()[0] == 2
    assert host_memory_cache_state()[:2] == (0, 0)


def test_environment_variable_turns_it_off():
    out = run_fresh(
        """
import os
os.environ["GRAPHENGINE_HOST_CACHE"] = "off"
from graphengine.runtime import host_memory_cache, host_memory_cache_enabled
assert not host_memory_cache_enabled()
with host_memory_cache() as active:
    assert not active
print("ok")
"""
    )
    assert out.strip() == "ok"


def test_set_host_memory_cache_rejects_non_bools():
    with pytest.raises(ValueError, match="'enabled' must be a bool"):
        set_host_memory_cache(1)


def test_threads_allocating_in_one_span_get_their_own_values(cache_on):
    results = {}

    def fill(value):
        tensors = [torch.full((BIG // 4 + value,), float(value)) for _ in range(5)]
        results[value] = all(bool((t == value).all()) for t in tensors)

    with host_memory_cache():
        threads = [threading.Thread(target=fill, args=(v,)) for v in range(1, 5)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert results == {1: True, 2: True, 3: True, 4: True}


def test_a_loader_pass_is_a_span_and_its_batches_are_exact(cache_on):
    num_nodes = 60_000
    generator = torch.Generator().manual_seed(0)
    data = Data(
        x=torch.arange(num_nodes, dtype=torch.float32).view(-1, 1).repeat(1, 64),
        edge_index=torch.randint(0, num_nodes, (2, 400_000), generator=generator),
        num_nodes=num_nodes,
    )
    for num_workers in (0, 1):
        loader = NeighborLoader(data, [10, 10], batch_size=2048, num_workers=num_workers)
        for batch in loader:
            assert host_memory_cache_state()[0] == 1
            expected = batch.n_id.to(torch.float32).view(-1, 1).expand(-1, 64)
            assert torch.equal(batch.x, expected)
        assert host_memory_cache_state()[:2] == (0, 0)
        passes = iter(loader)
        next(passes)
        del passes  # leaving a pass early ends its span too
        assert host_memory_cache_state()[:2] == (0, 0)


def test_a_forked_child_allocates_and_frees_inside_a_span(cache_on):
    context = torch.multiprocessing.get_context("fork")
    with host_memory_cache():
        block = torch.ones(BIG)
        child = context.Process(target=_allocate_and_exit, daemon=True)
        child.start()
        child.join(timeout=60)
        del block
    assert child.exitcode == 0


def _allocate_and_exit() -> None:
    # One thread: GNU OpenMP's pool does not survive a fork (a torch limit, not the cache's).
    torch.set_num_threads(1)
    tensors = [torch.empty(BIG).fill_(float(i)) for i in range(3)]
    assert all(float(t[0]) == i and float(t[-1]) == i for i, t in enumerate(tensors))
    del tensors


def test_under_a_cgroup_limit_the_pool_keeps_a_sixteenth_of_it():
    # A fresh process whose memory limit is made 64 MiB: a 12 MB block freed in a span is over
    # the pool's 4 MiB share and goes back to the system; unlimited, it is kept.
    script = f"""
import torch
import graphengine.runtime as runtime
runtime.memory_limit = lambda: {{limit}}
with runtime.host_memory_cache() as active:
    assert active
    block = torch.ones({BIG})
    del block
    print(runtime.host_memory_cache_state()[1])
"""
    assert int(run_fresh(script.format(limit=64 << 20))) == 0
    assert int(run_fresh(script.format(limit="None"))) >= BIG * 4
