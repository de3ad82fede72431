"""Sampling from several threads at once, Numba's threads, and the relabel table's size."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numba
import numpy as np
import pytest
import torch
from torch_geometric.data import Data

from graphengine import NeighborLoader
from samplers import HeteroNeighborSampler, LaborSampler, NeighborSampler, SamplerInput
from samplers.neighbor import table_bits_for
from tests.helpers.graphs import random_csc

REPO = Path(__file__).resolve().parents[2]

_CONCURRENT = textwrap.dedent(
    """
    import threading, numba, numpy as np
    from samplers import NeighborSampler, SamplerInput
    from tests.helpers.graphs import random_csc

    indptr, indices = random_csc(20000, 300000, seed=1)
    sampler = NeighborSampler(indptr, indices, [10, 10])
    seeds = np.arange(0, 20000, 7)
    expected = [sampler.sample_from_nodes(SamplerInput(seeds, seeds, s)).node for s in range(8)]
    results = [None] * 8

    def work(s):
        for _ in range(5):
            results[s] = sampler.sample_from_nodes(SamplerInput(seeds, seeds, s)).node

    threads = [threading.Thread(target=work, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(np.array_equal(a, b) for a, b in zip(results, expected))
    print(numba.threading_layer())
    """
)


@pytest.mark.parametrize("layer", ["workqueue", "default"])
def test_threads_sample_at_once_on_any_threading_layer(layer):
    """``workqueue`` aborts when two threads launch parallel kernels at once; the sampler
    then makes them take turns. Elsewhere it runs them concurrently."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "NUMBA_THREADING_LAYER": layer}
    done = subprocess.run(
        [sys.executable, "-c", _CONCURRENT],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    used = done.stdout.split()[-1]
    if layer == "default" and used == "workqueue":
        pytest.skip("neither Numba's omp nor tbb layer can be loaded here")
    assert used == "workqueue" if layer == "workqueue" else used in ("omp", "tbb")
    if layer == "workqueue":
        assert "take turns" in done.stderr


def _hinted_table_bits(sampler: NeighborSampler) -> int:
    """The table size the next call starts from: the last finished call's."""
    return sampler._sizes.free[-1].table_bits


def test_relabel_table_shrinks_after_a_huge_batch():
    indptr, indices = random_csc(50000, 400000, seed=2)
    sampler = NeighborSampler(indptr, indices, [-1, -1])
    small = np.arange(4)
    sampler.sample_from_nodes(SamplerInput(small, small, 0))
    small_bits = _hinted_table_bits(sampler)
    every = np.arange(50000)
    sampler.sample_from_nodes(SamplerInput(every, every, 0))
    assert _hinted_table_bits(sampler) == table_bits_for(50000) > small_bits
    out = sampler.sample_from_nodes(SamplerInput(small, small, 0))
    assert _hinted_table_bits(sampler) == table_bits_for(out.node.shape[0]) == small_bits
    assert len(sampler._sizes.free) == 1  # one record per call at once, not per call


@pytest.mark.parametrize("disjoint", [False, True])
def test_a_call_rebinds_no_attribute_of_the_sampler(disjoint):
    """Samplers are shared by a loader's threads: a call keeps its state in locals (and the
    pools it takes from), never in the sampler's attributes."""
    indptr, indices = random_csc(2000, 20000, seed=4)
    samplers = [
        NeighborSampler(indptr, indices, [5, 3], disjoint=disjoint),
        LaborSampler(indptr, indices, [5, 3]),
    ]
    hetero = HeteroNeighborSampler(
        ["n"], {"n": 2000}, {("n", "to", "n"): (indptr, indices)}, [5, 3], disjoint=disjoint
    )
    seeds = np.arange(0, 2000, 7)
    for sampler in [*samplers, hetero]:
        before = dict(vars(sampler))
        tables = {name: dict(v) for name, v in before.items() if isinstance(v, dict)}
        input_type = "n" if sampler is hetero else None
        for seed in range(3):
            sampler.sample_from_nodes(SamplerInput(seeds, seeds, seed, input_type=input_type))
        after = vars(sampler)
        assert after.keys() == before.keys()
        assert all(after[name] is value for name, value in before.items())
        for name, table in tables.items():  # nor writes into a dict it holds
            assert after[name].keys() == table.keys()
            assert all(after[name][key] is value for key, value in table.items()), name


def test_a_call_restores_the_callers_numba_thread_count():
    indptr, indices = random_csc(2000, 20000, seed=5)
    sampler = NeighborSampler(indptr, indices, [5, 3], num_threads=1)
    seeds = np.arange(100)
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("Numba has one thread: nothing to restore")
    previous = numba.get_num_threads()
    numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    try:
        sampler.sample_from_nodes(SamplerInput(seeds, seeds, 0))
        assert numba.get_num_threads() == numba.config.NUMBA_NUM_THREADS
    finally:
        numba.set_num_threads(previous)


def test_table_bits_keep_the_load_below_the_limit():
    for n in [0, 1, 700, 716, 717, 10_000, 1_000_000]:
        bits = table_bits_for(n)
        assert n < (1 << bits) * 70 // 100
        assert bits == 10 or n >= (1 << (bits - 1)) * 70 // 100


def test_sampler_thread_count_is_checked():
    indptr, indices = random_csc(10, 20, seed=0)
    with pytest.raises(ValueError, match=r"'num_threads' must be None or an int >= 1 \(got 0\)"):
        NeighborSampler(indptr, indices, [2], num_threads=0)
    sampler = NeighborSampler(indptr, indices, [2], num_threads=1)
    seeds = np.arange(10)
    assert sampler.sample_from_nodes(SamplerInput(seeds, seeds, 0)).node.shape[0] == 10


def test_loader_names_num_neighbors_in_its_errors():
    data = Data(edge_index=torch.tensor([[0, 1], [1, 0]]), num_nodes=2)
    with pytest.raises(ValueError, match=r"'num_neighbors' entries must be ints >= -1"):
        NeighborLoader(data, num_neighbors=[5, -2])
    with pytest.raises(TypeError, match=r"'num_neighbors' must be a sequence of ints"):
        NeighborLoader(data, num_neighbors=5)


def test_gathering_threads_take_a_share_of_torchs_threads_only_for_themselves():
    from graphengine import ops
    from graphengine.loader import InWorkerThreads, Pipeline, Stage

    if not ops.build_extension():
        pytest.skip("needs the extension")
    before = torch.get_num_threads()
    seen = []

    def probe(item):
        seen.append(torch.get_num_threads())
        return item

    stage = Stage("gather", InWorkerThreads(probe, 1), workers=2)
    assert list(Pipeline(range(20), [stage], prefetch=4)) == list(range(20))
    assert seen == [1] * 20
    assert torch.get_num_threads() == before  # the caller's count is untouched
    with pytest.raises(ValueError, match=r"'num_threads' must be an int >= 1 \(got 0\)"):
        ops.set_intraop_threads(0)


def test_loader_shares_torchs_threads_among_its_gathering_threads():
    if torch.get_num_threads() < 2:
        pytest.skip("one torch thread: nothing to share")
    data = Data(x=torch.arange(50.0), edge_index=torch.randint(0, 50, (2, 200)), num_nodes=50)
    loader = NeighborLoader(data, [3], batch_size=10, num_workers=2)
    gather = loader._pipeline.stages[1]
    assert gather.name == "gather" and gather.workers == 2
    assert gather.function.torch_threads == max(1, torch.get_num_threads() // 2)
    single = NeighborLoader(data, [3], batch_size=10, num_workers=1)
    # A whole share: the pipeline's gather is the one the caller's thread runs, unwrapped.
    assert single._pipeline.stages[1].function is single._stages[1].function
    assert [b.n_id.shape[0] >= 10 for b in loader] == [True] * 5
