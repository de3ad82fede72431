"""Distributed sampling over K parts equals single-machine sampling on the original graph;
remote feature rows equal the originals, with or without a cache."""

import json
from collections import Counter

import numpy as np
import pytest
import torch

from graphengine.data.partition import partition_dataset
from graphengine.distributed.data import DistData
from graphengine.distributed.features import AccessCounter, RemoteRowCache, cache_rows
from graphengine.distributed.sampler import DistNeighborSampler
from tests.helpers.processes import WORKERS, torchrun
from tests.helpers.workers.partition_worker import SAMPLING_CASES, multigraph

WORKER = WORKERS / "partition_worker.py"


@pytest.mark.parametrize("num_parts,method", [(1, "random"), (2, "metis"), (3, "random")])
def test_batches_do_not_depend_on_the_partition(tmp_path, num_parts, method):
    partition_dataset(multigraph(), num_parts, tmp_path / "parts", method=method)
    result = torchrun(num_parts, WORKER, "sample", tmp_path / "parts", tmp_path / "out")
    assert result.returncode == 0, result.stderr[-3000:]
    reports = [json.loads((tmp_path / f"out.{r}").read_text()) for r in range(num_parts)]
    assert all(r["checked"] == 6 * len(SAMPLING_CASES) for r in reports)
    remote = sum(r["stats"]["remote_frontier_nodes"] for r in reports)
    assert (remote > 0) == (num_parts > 1)


@pytest.mark.parametrize("num_parts", [2, 3])
def test_remote_rows_equal_the_originals_with_and_without_a_cache(tmp_path, num_parts):
    partition_dataset(multigraph(), num_parts, tmp_path / "parts", method="random")
    result = torchrun(num_parts, WORKER, "load", tmp_path / "parts", tmp_path / "out")
    assert result.returncode == 0, result.stderr[-3000:]
    for rank in range(num_parts):
        report = json.loads((tmp_path / f"out.{rank}").read_text())
        rates = report["hit_rates"]
        assert rates["None"] == 0.0 and rates["100%"] == 1.0
        assert 0.0 < rates["10%"] <= rates["100%"]
        # A worker maps its own part's files and the id maps, never another part's.
        mapped = report["mapped"]
        assert any(name.startswith(f"part-{rank}/") for name in mapped), mapped
        assert all(
            name.startswith(f"part-{rank}/") or name in ("new_to_orig.npy", "orig_to_new.npy")
            for name in mapped
        ), mapped


def test_cache_sizes_in_rows_shares_and_bytes():
    assert cache_rows(None, 100, 1000) == 0
    assert cache_rows(250, 100, 1000) == 250
    assert cache_rows("5%", 100, 1000) == 50
    assert cache_rows("10KB", 100, 1000) == 100
    assert cache_rows("1KiB", 100, 1000) == 10
    assert cache_rows("5000", 100, 1000) == 1000  # never more than the remote nodes
    for bad in ("5 apples", "-3", "%"):
        with pytest.raises(ValueError, match="'remote_cache' must be rows"):
            cache_rows(bad, 100, 1000)
    with pytest.raises(ValueError, match="must not be negative"):
        cache_rows(-3, 100, 1000)


def test_access_counter_ranks_by_reads_then_id():
    counter = AccessCounter(merge_every=4)  # merges several times on the way
    for batch in ([5, 9, 2], [9, 2], [9, 7], [2, 1]):
        counter.add(np.array(batch, dtype=np.int64))
    reads = Counter([5, 9, 2, 9, 2, 9, 7, 2, 1])
    expected = sorted(reads, key=lambda node: (-reads[node], node))
    assert counter.ranked().tolist() == expected
    assert counter.most_frequent(3).tolist() == sorted(expected[:3])


def test_cache_lookup_finds_cached_rows_only():
    cache = RemoteRowCache(np.array([3, 8, 20]), torch.zeros(3, 2), torch.zeros(3))
    np.testing.assert_array_equal(
        cache.lookup(np.array([8, 4, 20, 3, 21, 0])), [1, -1, 2, 0, -1, -1]
    )


def test_opening_a_partition_needs_a_process_group(tmp_path):
    partition_dataset(multigraph(), 2, tmp_path / "parts", method="random")
    with pytest.raises(RuntimeError, match=r"needs a joined torch\.distributed group"):
        DistData.open(tmp_path / "parts")


def test_partitioned_sampling_refuses_induced_subgraphs():
    with pytest.raises(ValueError, match="no induced subgraphs"):
        DistNeighborSampler(None, [2], None, subgraph_type="induced")
