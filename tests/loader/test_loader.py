"""NeighborLoader's PyG contract, checked on graphs whose features are node ids."""

import numpy as np
import pytest
import torch
from torch_geometric.nn import GraphSAGE

from graphengine import FeatureStore, Graph, NeighborLoader
from graphengine.datasets import SyntheticSpec, generate
from samplers import NeighborSampler
from tests.helpers.graphs import id_graph


@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32], ids=["int64", "int32"])
def test_batches_follow_pyg_contract(index_dtype):
    data = id_graph(index_dtype=index_dtype)
    loader = NeighborLoader(data, [4, 3], batch_size=16, shuffle=True, seed=1)
    assert len(loader) == 19
    edges = set(map(tuple, data.edge_index.long().T.tolist()))
    seen = []
    for batch in loader:
        n = batch.num_nodes
        assert torch.equal(batch.x[:, 0].long(), batch.n_id)
        assert torch.equal(batch.y, batch.n_id)
        assert torch.equal(batch.mask, data.mask[batch.n_id])
        assert torch.equal(batch.edge_attr.long(), batch.e_id)
        assert torch.equal(batch.edge_weight, data.edge_weight[batch.e_id])
        assert batch.title == "graph-level attribute"
        assert batch.edge_index.dtype == torch.int64
        assert int(batch.edge_index.max()) < n
        src, dst = batch.n_id[batch.edge_index[0]], batch.n_id[batch.edge_index[1]]
        assert torch.equal(data.edge_index[0, batch.e_id].long(), src)
        assert torch.equal(data.edge_index[1, batch.e_id].long(), dst)
        assert set(zip(src.tolist(), dst.tolist(), strict=True)) <= edges
        assert torch.equal(batch.input_id, batch.n_id[: batch.batch_size])
        assert sum(batch.num_sampled_nodes) == n
        assert sum(batch.num_sampled_edges) == batch.edge_index.shape[1]
        seen.append(batch.n_id[: batch.batch_size])
    assert torch.equal(torch.cat(seen).sort().values, torch.arange(300))


def test_input_nodes_as_ids_mask_and_memmap_features(tmp_path):
    data = id_graph()
    features = np.lib.format.open_memmap(
        tmp_path / "x.npy", mode="w+", dtype=np.float32, shape=(300, 2)
    )
    features[:] = np.arange(300, dtype=np.float32)[:, None]
    features.flush()
    data.x = np.load(tmp_path / "x.npy", mmap_mode="r")
    ids = torch.tensor([5, 7, 11, 200])
    by_ids = next(iter(NeighborLoader(data, [2], batch_size=4, input_nodes=ids)))
    assert torch.equal(by_ids.n_id[:4], ids)
    assert torch.equal(by_ids.input_id, torch.arange(4))
    assert torch.equal(by_ids.x[:, 0].long(), by_ids.n_id)
    mask = torch.zeros(300, dtype=torch.bool)
    mask[ids] = True
    by_mask = next(iter(NeighborLoader(data, [2], batch_size=4, input_nodes=mask)))
    assert torch.equal(by_mask.n_id[:4], ids)
    assert torch.equal(by_mask.input_id, ids)


def test_same_seed_same_batches_and_epochs_differ():
    data = id_graph()
    first = NeighborLoader(data, [5, 5], batch_size=50, shuffle=True, seed=4)
    second = NeighborLoader(data, [5, 5], batch_size=50, shuffle=True, seed=4)
    epoch_a = [b.e_id for b in first]
    epoch_b = [b.e_id for b in second]
    assert all(torch.equal(a, b) for a, b in zip(epoch_a, epoch_b, strict=True))
    next_epoch = [b.e_id for b in first]
    assert not all(torch.equal(a, b) for a, b in zip(epoch_a, next_epoch, strict=True))
    first.set_epoch(0)
    assert all(torch.equal(a, b.e_id) for a, b in zip(epoch_a, first, strict=True))


def test_call_drop_last_and_repr():
    data = id_graph()
    loader = NeighborLoader(data, [3], batch_size=64, drop_last=True)
    assert len(loader) == 4 and len(list(loader)) == 4
    batch = loader([3, 1, 2])
    assert torch.equal(batch.n_id[:3], torch.tensor([3, 1, 2]))
    assert repr(loader) == "NeighborLoader()"  # as PyG prints it


def test_workers_give_the_same_batches():
    data = id_graph()
    reference = [b.n_id for b in NeighborLoader(data, [4, 2], batch_size=64, seed=2)]
    for filter_per_worker in (True, False):
        loader = NeighborLoader(
            data, [4, 2], batch_size=64, seed=2, num_workers=2, filter_per_worker=filter_per_worker
        )
        assert all(torch.equal(a, b.n_id) for a, b in zip(reference, loader, strict=True))


def test_uint8_input_nodes_are_refused_as_neither_mask_nor_ids():
    """A uint8 array was taken as ids (torch's old masks were uint8; PyG refuses it)."""
    from graphengine import LaborLoader
    from tests.helpers.graphs import id_hetero

    mask = torch.zeros(300, dtype=torch.uint8)
    mask[[5, 7]] = 1
    expected = r"'input_nodes' has dtype uint8, expected a bool mask or integer node ids"
    with pytest.raises(TypeError, match=expected):
        NeighborLoader(id_graph(), [2], batch_size=4, input_nodes=mask)
    with pytest.raises(TypeError, match=expected):
        LaborLoader(id_graph(), [2], batch_size=4, input_nodes=mask.numpy())
    with pytest.raises(TypeError, match=r"'input_nodes' of 'paper' has dtype uint8"):
        NeighborLoader(id_hetero(), [2], input_nodes=("paper", mask[:120]))
    by_mask = NeighborLoader(id_graph(), [2], batch_size=4, input_nodes=mask.bool())
    assert next(iter(by_mask)).n_id[:2].tolist() == [5, 7]


def test_graph_dataset_input_and_trimmed_sage_matches_untrimmed():
    dataset = generate("t", SyntheticSpec(2000, 30_000, 8, 3, 500, 100))
    loader = NeighborLoader(dataset, [5, 4, 3], batch_size=32, input_nodes=dataset.train_idx)
    batch = next(iter(loader))
    assert torch.equal(batch.x, torch.from_numpy(dataset.x)[batch.n_id])
    torch.manual_seed(0)
    model = GraphSAGE(8, 16, 3, 3).eval()
    full = model(batch.x, batch.edge_index)[: batch.batch_size]
    trimmed = model(
        batch.x,
        batch.edge_index,
        num_sampled_nodes_per_hop=batch.num_sampled_nodes,
        num_sampled_edges_per_hop=batch.num_sampled_edges,
    )[: batch.batch_size]
    assert torch.allclose(full, trimmed, atol=1e-5)


def test_graphsage_learns_on_batches():
    dataset = generate("t", SyntheticSpec(3000, 45_000, 16, 4, 1500, 300, noise=3.0))
    loader = NeighborLoader(
        dataset, [10, 10], batch_size=128, input_nodes=dataset.train_idx, shuffle=True, seed=0
    )
    torch.manual_seed(0)
    model = GraphSAGE(16, 32, 2, 4)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for _ in range(3):
        for batch in loader:
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(
                model(batch.x, batch.edge_index)[: batch.batch_size], batch.y[: batch.batch_size]
            )
            loss.backward()
            optimizer.step()
            losses.append(float(loss.detach()))
    assert np.mean(losses[-5:]) < 0.5 * np.mean(losses[:5])


def test_unsupported_and_bad_arguments():
    data = id_graph()
    with pytest.raises(ValueError, match="'time_attr': the data has no attribute 'time'"):
        NeighborLoader(data, [2], time_attr="time")
    with pytest.raises(ValueError, match="'input_time' is set while 'time_attr' is not"):
        NeighborLoader(data, [2], input_time=torch.zeros(300, dtype=torch.long))
    with pytest.raises(ValueError, match="'subgraph_type' must be one of"):
        NeighborLoader(data, [2], subgraph_type="both")
    with pytest.raises(
        TypeError, match=r"'data' must be a PyG Data or HeteroData, .* \(got Graph\)"
    ):
        NeighborLoader(Graph.from_data(data), [2])
    with pytest.raises(ValueError, match="'input_nodes' holds node id 300"):
        NeighborLoader(data, [2], input_nodes=torch.tensor([1, 300]))
    with pytest.raises(ValueError, match=r"mask must have shape \(300,\)"):
        NeighborLoader(data, [2], input_nodes=torch.ones(5, dtype=torch.bool))
    with pytest.raises(ValueError, match="'batch_size' must be a positive int"):
        NeighborLoader(data, [2], batch_size=0)
    with pytest.raises(ValueError, match="'index' holds node id 999"):
        NeighborLoader(data, [2])([999])


def hop_slices(batch):
    """Per hop: (first local id of its frontier, end of its frontier, its edge slice)."""
    node_ends = np.cumsum(batch.num_sampled_nodes)
    edge_ends = np.cumsum([0, *batch.num_sampled_edges])
    starts = [0, *node_ends[:-1]]
    return [
        (starts[h], node_ends[h], slice(edge_ends[h], edge_ends[h + 1]))
        for h in range(len(batch.num_sampled_edges))
    ]


def test_replace_draws_fanout_edges_of_the_graph_per_node():
    data = id_graph(num_nodes=200, num_edges=600, seed=3)  # many nodes of in-degree 0..2
    in_degree = torch.bincount(data.edge_index[1], minlength=200)
    assert (in_degree == 0).any() and (in_degree < 4).any()
    fanouts = [4, 3]
    loader = NeighborLoader(data, fanouts, batch_size=32, replace=True, seed=6)
    edges = set(map(tuple, data.edge_index.T.tolist()))
    for batch in loader:
        assert torch.equal(batch.x[:, 0].long(), batch.n_id)
        src, dst = batch.n_id[batch.edge_index[0]], batch.n_id[batch.edge_index[1]]
        assert set(zip(src.tolist(), dst.tolist(), strict=True)) <= edges
        assert torch.equal(data.edge_index[:, batch.e_id], torch.stack([src, dst]))
        for hop, (start, end, edge_slice) in enumerate(hop_slices(batch)):
            col = batch.edge_index[1, edge_slice]
            assert bool(((col >= start) & (col < end)).all())
            counts = torch.bincount(col - start, minlength=end - start)
            frontier = batch.n_id[start:end]
            expected = torch.where(in_degree[frontier] > 0, fanouts[hop], 0)
            assert torch.equal(counts, expected)


def test_empty_seed_batches():
    data = id_graph()
    for num_workers in (0, 2):
        for empty in ([], torch.zeros(300, dtype=torch.bool)):
            loader = NeighborLoader(
                data, [2], batch_size=4, input_nodes=empty, num_workers=num_workers
            )
            assert len(loader) == 0 and list(loader) == []
    batch = NeighborLoader(data, [3, 2], batch_size=4)([])
    assert batch.num_nodes == 0 and batch.batch_size == 0
    assert batch.edge_index.shape == (2, 0) and batch.x.shape == (0, 3)
    assert batch.n_id.numel() == batch.e_id.numel() == batch.input_id.numel() == 0
    assert batch.num_sampled_nodes == [0, 0, 0] and batch.num_sampled_edges == [0, 0]


@pytest.mark.parametrize("num_workers", [0, 2])
def test_fanout_zero_gives_the_seeds_only(num_workers):
    data = id_graph()
    seeds = torch.tensor([7, 3, 250, 11, 0])
    loader = NeighborLoader(data, [0, 0], batch_size=5, input_nodes=seeds, num_workers=num_workers)
    (batch,) = list(loader)
    assert torch.equal(batch.n_id, seeds) and torch.equal(batch.x[:, 0].long(), seeds)
    assert batch.edge_index.shape == (2, 0) and batch.e_id.numel() == 0
    assert batch.num_sampled_nodes == [5, 0, 0] and batch.num_sampled_edges == [0, 0]


class RandomTransform:
    """Tags each batch with the next draw of a generator it owns."""

    def __init__(self):
        self.generator = torch.Generator().manual_seed(11)

    def __call__(self, batch):
        batch.noise = torch.rand(1, generator=self.generator)
        return batch


def test_random_transform_sees_batches_in_order_for_any_worker_count():
    data = id_graph()
    expected_noise = torch.rand(10, generator=torch.Generator().manual_seed(11))
    runs = {}
    for num_workers in (0, 1, 2):
        loader = NeighborLoader(
            data,
            [3, 2],
            batch_size=30,
            shuffle=True,
            seed=8,
            num_workers=num_workers,
            transform=RandomTransform(),
        )
        runs[num_workers] = list(loader)
        assert len(runs[num_workers]) == 10
        noise = torch.cat([batch.noise for batch in runs[num_workers]])
        assert torch.equal(noise, expected_noise)
    for num_workers in (1, 2):
        for a, b in zip(runs[0], runs[num_workers], strict=True):
            assert torch.equal(a.n_id, b.n_id) and torch.equal(a.e_id, b.e_id)


def global_noise(batch):
    """A transform that draws from torch's global generator, as most PyG transforms do."""
    batch.noise = torch.rand(1)
    return batch


def test_transform_on_the_global_generator_interleaves_with_the_caller_as_without_threads():
    """The training loop draws from the same generator (dropout): the transform's draws must
    interleave with the loop's exactly as with ``num_workers=0``."""
    data = id_graph()
    runs = {}
    for num_workers in (0, 2):
        torch.manual_seed(0)
        loader = NeighborLoader(
            data, [3, 2], batch_size=30, seed=8, num_workers=num_workers, transform=global_noise
        )
        runs[num_workers] = [(batch.noise, torch.rand(1)) for batch in loader]
        assert loader.stage_times["transform"] > 0
    for (noise_0, step_0), (noise_2, step_2) in zip(runs[0], runs[2], strict=True):
        assert torch.equal(noise_0, noise_2) and torch.equal(step_0, step_2)


def test_loader_arguments_are_checked():
    data = id_graph()
    with pytest.raises(ValueError, match=r"'prefetch' must be an int >= 1 \(got 0\)"):
        NeighborLoader(data, [2], prefetch=0)
    other = Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]), 2)
    sampler = NeighborSampler(other.indptr, other.indices, [1])
    with pytest.raises(ValueError, match=r"'neighbor_sampler' samples a graph of 2 nodes"):
        NeighborLoader(data, [2], neighbor_sampler=sampler)
    store = FeatureStore({"x": torch.zeros(3)})
    with pytest.raises(ValueError, match=r"the FeatureStore has 3 rows, the Graph 2 nodes"):
        NeighborLoader((store, other), [1])
    with pytest.raises(TypeError, match=r"must be \(FeatureStore, Graph\) \(got dict first\)"):
        NeighborLoader(({"x": torch.zeros(2)}, other), [1])
    with pytest.raises(ValueError, match=r"'world_size' must be an int >= 1 \(got 0\)"):
        NeighborLoader(data, [2], seed=1, rank=0, world_size=0)


def test_a_pair_with_an_empty_feature_store_gives_the_structure_alone():
    data = id_graph()
    graph = Graph.from_data(data)
    seeds = torch.arange(4)
    bare = list(NeighborLoader((FeatureStore(), graph), [2, 2], input_nodes=seeds, seed=3))
    full = list(NeighborLoader(data, [2, 2], input_nodes=seeds, seed=3))
    assert len(bare) == len(full)
    for got, expected in zip(bare, full, strict=True):
        assert "x" not in got and "y" not in got
        assert torch.equal(got.n_id, expected.n_id)
        assert torch.equal(got.edge_index, expected.edge_index)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the behaviour without CUDA")
def test_pin_memory_without_cuda_warns_and_loads_as_torch_does():
    data = id_graph()
    with pytest.warns(UserWarning, match=r"'pin_memory=True' needs CUDA"):
        loader = NeighborLoader(data, [2], batch_size=10, pin_memory=True)
    batch = next(iter(loader))
    assert torch.equal(batch.x[:, 0].long(), batch.n_id)
