"""The loaders' typed options: SamplingConfig and LoadingConfig validate every field once,
naming it and its value, and every loader is built from them."""

import dataclasses

import numpy as np
import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.sampler.base import NumNeighbors, SubgraphType

from graphengine.loader import (
    LaborLoader,
    LinkNeighborLoader,
    LoadingConfig,
    NeighborLoader,
    SamplingConfig,
)


def small_data() -> Data:
    edge_index = torch.tensor([[0, 1, 2, 3, 4, 0], [1, 2, 3, 4, 0, 2]])
    return Data(x=torch.arange(5.0).view(5, 1), edge_index=edge_index, num_nodes=5)


def test_sampling_config_names_each_bad_field_and_value():
    cases = [
        ({"kind": "layer"}, r"'kind' must be one of \('neighbor', 'labor'\) \(got 'layer'\)"),
        ({"subgraph_type": "both"}, r"'subgraph_type' must be one of .* \(got 'both'\)"),
        ({"temporal_strategy": "first"}, r"'temporal_strategy' must be one of .*'first'"),
        ({"kind": "labor", "replace": True}, r"LaborLoader does not take replace=True"),
        ({"kind": "labor", "time_attr": "t"}, r"LaborLoader does not take time_attr='t'"),
    ]
    for options, message in cases:
        with pytest.raises(ValueError, match=message):
            SamplingConfig([2, 2], **options)
    with pytest.raises(ValueError, match=r"'num_neighbors' entries must be ints >= -1"):
        SamplingConfig([2, -3])
    with pytest.raises(TypeError, match=r"'weight_attr' must be an attribute name or None"):
        SamplingConfig([2], weight_attr=3)


def test_sampling_config_keeps_pygs_spellings():
    config = SamplingConfig([3, -1], subgraph_type=SubgraphType.induced)
    assert config.subgraph_type == "induced"
    assert config.fanouts() == (3, -1)
    edge_types = [("a", "to", "b"), ("b", "to", "a")]
    num_neighbors = NumNeighbors({("a", "to", "b"): [4]}, default=[1])
    resolved = SamplingConfig(num_neighbors).fanouts(edge_types)
    assert resolved == {("a", "to", "b"): [4], ("b", "to", "a"): [1]}
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.replace = True


def test_loading_config_names_each_bad_field_and_value():
    for options, message in [
        ({"batch_size": 0}, r"'batch_size' must be a positive int \(got 0\)"),
        ({"num_workers": -1}, r"'num_workers' must be an int >= 0 \(got -1\)"),
        ({"prefetch": True}, r"'prefetch' must be an int >= 1 \(got True\)"),
    ]:
        with pytest.raises(ValueError, match=message):
            LoadingConfig(**options)
    loading = LoadingConfig(num_workers=0, prefetch=3, device="cpu")
    assert (loading.threads, loading.in_flight, loading.device) == (1, 3, torch.device("cpu"))
    assert not loading.copies_to_cuda


def test_loaders_are_built_from_the_configs():
    data = small_data()
    loader = NeighborLoader(data, [2], batch_size=2, disjoint=True, num_workers=0, seed=1)
    assert loader.sampling == SamplingConfig((2,), disjoint=True)
    assert loader.loading == LoadingConfig(batch_size=2, num_workers=0, seed=1)
    labor = LaborLoader(data, [2], importance_sampling=1, batch_size=3)
    assert labor.sampling == SamplingConfig((2,), kind="labor", importance_sampling=1)
    link = LinkNeighborLoader(data, [2], batch_size=4, replace=True, prefetch_factor=5)
    assert link.sampling == SamplingConfig((2,), replace=True)
    assert (link.loading.batch_size, link.loading.prefetch) == (4, 5)
    assert not isinstance(link, NeighborLoader)
    with pytest.raises(TypeError, match=r"LinkNeighborLoader got arguments it does not support"):
        LinkNeighborLoader(data, [2], sampler="x")


def test_loader_seeds_are_ints_or_none():
    data = small_data()
    for seed in (1.5, "a", True):
        with pytest.raises(TypeError, match=rf"'seed' must be an int or None \(got {seed!r}\)"):
            NeighborLoader(data, [2], batch_size=2, seed=seed)
    with pytest.raises(TypeError, match=r"'seed' must be an int or None \(got 1.5\)"):
        LinkNeighborLoader(data, [2], batch_size=2, seed=1.5)
    plain = [b.n_id for b in NeighborLoader(data, [2], batch_size=2, shuffle=True, seed=3)]
    numpy = NeighborLoader(data, [2], batch_size=2, shuffle=True, seed=np.int64(3))
    assert type(numpy.loading.seed) is int
    assert all(torch.equal(a, b.n_id) for a, b in zip(plain, numpy, strict=True))
    torch.manual_seed(0)
    loader = NeighborLoader(data, [2], batch_size=2, shuffle=True, seed=None)
    seeds = torch.cat([b.n_id[: b.batch_size] for b in loader])
    assert sorted(seeds.tolist()) == list(range(5))


def loader_builders():
    """Builders of each loader that takes a seed and a device, from data and options."""
    from graphengine.loader import ClusterData, ClusterLoader, GraphSAINTNodeSampler

    return {
        "NeighborLoader": lambda data, **o: NeighborLoader(data, [2], batch_size=2, **o),
        "LaborLoader": lambda data, **o: LaborLoader(data, [2], batch_size=2, **o),
        "LinkNeighborLoader": lambda data, **o: LinkNeighborLoader(data, [2], batch_size=2, **o),
        "ClusterLoader": lambda data, **o: ClusterLoader(
            ClusterData(data, num_parts=2, log=False), batch_size=1, **o
        ),
        "GraphSAINTNodeSampler": lambda data, **o: GraphSAINTNodeSampler(
            data, batch_size=2, num_steps=1, **o
        ),
    }


@pytest.mark.parametrize("seed", [-1, 2**63, 2**64])
def test_seeds_outside_what_the_mixing_honours_are_refused(seed):
    """The batch seeds are mixed from the seed modulo 2^64: 2^64 gave seed 0's batches and -1
    2^64 - 1's. Every loader takes [0, 2^63 - 1], as the CLI's --seed does."""
    from graphengine.cli.values import MAX_SEED
    from graphengine.loader.seeds import OwnSeedBatches, SeedBatches

    data = small_data()
    message = rf"'seed' must be in \[0, 2\^63 - 1\] \(got {seed}\)"
    for name, build in loader_builders().items():
        with pytest.raises(ValueError, match=message):
            build(data, seed=seed)
            pytest.fail(f"{name} took seed={seed}")
    for build in (
        lambda: SeedBatches(5, 2, False, False, seed),
        lambda: OwnSeedBatches(5, 2, False, seed, 0),
        lambda: LoadingConfig(seed=seed),
    ):
        with pytest.raises(ValueError, match=message):
            build()
    assert MAX_SEED == 2**63 - 1
    shuffled = {"batch_size": 2, "shuffle": True}
    largest = [b.n_id for b in NeighborLoader(data, [2], seed=MAX_SEED, **shuffled)]
    assert len(largest) == 3


@pytest.mark.parametrize("device", ["meta", torch.device("meta"), "mps", "xpu:0"])
def test_devices_a_batch_cannot_be_moved_to_and_used_on_are_refused(device):
    """A loader moves batches to a GPU only: any other device was accepted and ignored."""
    message = rf"'device' must be 'cpu' or a CUDA device \('cuda', 'cuda:N'\) \(got '{device}'\)"
    data = small_data()
    for name, build in loader_builders().items():
        with pytest.raises(ValueError, match=message):
            build(data, device=device)
            pytest.fail(f"{name} took device={device!r}")
        build(data, device="cpu")
    with pytest.raises(ValueError, match=message):
        LoadingConfig(device=device)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a CPU-only torch")
def test_a_cuda_device_without_cuda_is_refused_at_construction():
    data = small_data()
    message = r"device='cuda' needs CUDA, and torch.cuda.is_available\(\) is False"
    with pytest.raises(ValueError, match=message):
        NeighborLoader(data, [2], batch_size=2, device="cuda")
    with pytest.raises(ValueError, match=message):
        LinkNeighborLoader(data, [2], batch_size=2, device="cuda")
    with pytest.raises(ValueError, match=r"device='cuda:1' needs CUDA"):
        LoadingConfig(device=torch.device("cuda:1"))
    with pytest.raises(
        ValueError, match=r"'device' must be a torch device or its name \(got 'gpu'\)"
    ):
        NeighborLoader(data, [2], batch_size=2, device="gpu")
