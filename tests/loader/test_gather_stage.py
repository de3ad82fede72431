"""GatherFeatures' choice of path per table (host, cached on a device, zero-copy) on the CPU."""

import numpy as np
import pytest
import torch

from graphengine import FeatureStore
from graphengine.loader import NeighborLoader, stages
from graphengine.loader.stages import CopyToDevice, GatherFeatures
from samplers import SamplerOutput
from tests.helpers.graphs import id_graph


class PinnedLooking:
    """A table that reports being pinned, which a CPU-only torch cannot make."""

    def is_pinned(self):
        return True


class Stub:
    def __init__(self, caches):
        self.caches = caches

    def __getitem__(self, key):
        return PinnedLooking() if key.startswith("pinned") else torch.zeros(1)

    def cache_device(self, key):
        return self.caches.get(key)


def sampled(node):
    node = np.asarray(node, dtype=np.int64)
    return SamplerOutput(
        node=node,
        row=np.zeros(0, dtype=np.int64),
        col=np.zeros(0, dtype=np.int64),
        edge=np.zeros(0, dtype=np.int64),
        num_sampled_nodes=(len(node),),
        num_sampled_edges=(),
        batch_size=len(node),
        input_id=np.arange(len(node)),
    )


def test_placement_per_table():
    cuda1 = torch.device("cuda", 1)
    store = Stub({"cached_gpu": cuda1, "cached_cpu": torch.device("cpu"), "pinned_cached": cuda1})
    gather = GatherFeatures(store)
    assert gather.placement(store, "cached_gpu") == cuda1  # wherever the batch goes
    assert gather.placement(store, "cached_cpu") is None
    assert gather.placement(store, "pinned") is None  # no GPU target: host path as before
    assert gather.placement(store, "plain") is None
    gather.device = "cuda:0"
    assert gather.device == torch.device("cuda", 0)
    assert gather.placement(store, "pinned") == torch.device("cuda", 0)
    assert gather.placement(store, "pinned_cached") == cuda1  # the cache decides
    assert gather.placement(store, "plain") is None
    gather.device = "cpu"
    assert gather.placement(store, "pinned") is None


def test_cpu_cache_takes_the_host_path_with_the_right_rows():
    x = torch.rand(200, 5)
    y = torch.arange(200)
    store = FeatureStore({"x": x, "y": y})
    store.enable_cache("x", 0.25, torch.arange(200), device="cpu")
    gather = GatherFeatures(store, device="cpu")
    assert gather.placement(store, "x") is None
    node = torch.randint(0, 200, (64,))
    data = gather(sampled(node.numpy()))
    assert torch.equal(data.x, x[node]) and torch.equal(data.y, y[node])
    assert store.cache_stats("x")["lookups"] == 64
    with pytest.raises(IndexError, match=r"holds id 200 at position 1, outside \[0, 200\)"):
        gather(sampled([3, 200]))


def test_copy_to_device_needs_a_cuda_device():
    with pytest.raises(ValueError, match=r"'device' must be a CUDA device \(got cpu\)"):
        CopyToDevice(torch.device("cpu"))


def test_a_batch_larger_than_the_memory_left_is_refused_naming_its_size(monkeypatch):
    """PyG-style fanouts of -1 over a dense graph can reach more rows than fit: the gather
    refuses the batch by its size before allocating, instead of ``std::bad_alloc``."""
    data = id_graph(num_nodes=300, num_edges=3000)
    loader = NeighborLoader(data, [-1, -1], batch_size=8, disjoint=True, num_workers=0)
    monkeypatch.setattr(stages, "CHECKED_BATCH_BYTES", 0)
    monkeypatch.setattr(stages, "available_memory", lambda: 100)
    with pytest.raises(MemoryError, match=r"a batch of 8 seeds reached \d+ nodes and \d+ edges"):
        next(iter(loader))
    monkeypatch.setattr(stages, "available_memory", lambda: 1 << 40)
    assert next(iter(loader)).x.shape[1] == 3
