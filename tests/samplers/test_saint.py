"""GraphSAINT's samplers against exact probabilities and a direct computation of their
coefficients, on graphs whose node features are node ids and edge attributes edge ids."""

import logging

import numpy as np
import pytest
import torch
from scipy.stats import chisquare
from torch_geometric.data import Data

from graphengine.loader.saint import (
    GraphSAINTEdgeSampler,
    GraphSAINTNodeSampler,
    GraphSAINTRandomWalkSampler,
)
from samplers._kernels.walk import random_walks
from samplers.saint import (
    SaintGraph,
    cumulative_probabilities,
    edge_probabilities,
    edge_selection,
    walk_selection,
)


def id_graph(num_nodes=60, num_edges=400, seed=0) -> Data:
    rng = np.random.default_rng(seed)
    edge_index = torch.from_numpy(rng.integers(0, num_nodes - 5, (2, num_edges)))  # 5 isolated
    return Data(
        x=torch.arange(num_nodes, dtype=torch.float32).view(-1, 1),
        y=torch.arange(num_nodes) % 3,
        edge_index=edge_index,
        edge_attr=torch.arange(num_edges),
        num_nodes=num_nodes,
    )


def check_subgraph(batch, data):
    """Nodes ascending and distinct, every edge between them present once, attributes sliced."""
    nodes = batch.x.view(-1).long()
    assert torch.equal(nodes, nodes.unique())
    assert torch.equal(batch.y, data.y[nodes])
    src, dst = data.edge_index
    inside = torch.isin(src, nodes) & torch.isin(dst, nodes)
    assert sorted(batch.edge_attr.tolist()) == torch.nonzero(inside).view(-1).tolist()
    original = data.edge_index[:, batch.edge_attr]
    assert torch.equal(nodes[batch.edge_index], original)
    return nodes


@pytest.mark.parametrize(
    "make",
    [
        lambda d: GraphSAINTNodeSampler(d, batch_size=30, num_steps=4, seed=1),
        lambda d: GraphSAINTEdgeSampler(d, batch_size=20, num_steps=4, seed=1),
        lambda d: GraphSAINTRandomWalkSampler(d, batch_size=10, walk_length=3, num_steps=4, seed=1),
    ],
    ids=["node", "edge", "walk"],
)
def test_subgraphs_are_induced_and_sliced(make):
    data = id_graph()
    loader = make(data)
    batches = list(loader)
    assert len(batches) == len(loader) == 4
    for batch in batches:
        check_subgraph(batch, data)
    again = list(make(data))  # the same seed, the same subgraphs
    assert all(torch.equal(a.x, b.x) for a, b in zip(batches, again, strict=True))


def inclusion_frequency(loader, num_nodes, rounds):
    counts = np.zeros(num_nodes)
    for epoch in range(rounds):
        loader.set_epoch(epoch)
        for batch in loader:
            counts[batch.x.view(-1).long().numpy()] += 1
    return counts / (rounds * len(loader))


def test_node_sampler_includes_each_node_with_its_exact_probability():
    data = id_graph(seed=2)
    budget = 25
    loader = GraphSAINTNodeSampler(data, batch_size=budget, num_steps=50, seed=3)
    frequency = inclusion_frequency(loader, data.num_nodes, 20)
    out_degree = np.bincount(data.edge_index[0].numpy(), minlength=data.num_nodes)
    exact = 1 - (1 - out_degree / data.num_edges) ** budget  # edges drawn with replacement
    trials = 1000
    z = (frequency - exact) / np.sqrt(exact * (1 - exact) / trials + 1e-12)
    assert np.abs(z).max() < 5


def test_edge_sampler_includes_each_node_with_its_exact_probability():
    data = id_graph(seed=4)
    budget = 15
    loader = GraphSAINTEdgeSampler(data, batch_size=budget, num_steps=50, seed=5)
    frequency = inclusion_frequency(loader, data.num_nodes, 20)
    graph = SaintGraph(data.edge_index.numpy(), data.num_nodes)
    p = edge_probabilities(graph)
    row, col = data.edge_index.numpy()
    in_degree = np.bincount(col, minlength=data.num_nodes)
    out_degree = np.bincount(row, minlength=data.num_nodes)
    weight = in_degree[row] + out_degree[col]  # PyG's weights, recomputed
    np.testing.assert_allclose(p, weight / weight.sum(), rtol=1e-6)
    touching = np.zeros(data.num_nodes)
    for e in range(data.num_edges):
        touching[row[e]] += p[e]
        if col[e] != row[e]:
            touching[col[e]] += p[e]
    exact = 1 - (1 - touching) ** budget
    z = (frequency - exact) / np.sqrt(exact * (1 - exact) / 1000 + 1e-12)
    assert np.abs(z).max() < 5


def test_random_walks_follow_out_edges_uniformly():
    edge_index = np.array([[0, 0, 0, 1, 2, 3], [1, 2, 3, 0, 0, 4]])  # 4 has no out-edge
    graph = SaintGraph(edge_index, 5)
    nodes = walk_selection(graph, 5, 0, np.random.default_rng(0))
    assert set(nodes) <= set(range(5))
    walks = np.empty((6000, 3), dtype=np.int64)
    random_walks(graph.indptr, graph.cols, np.zeros(6000, dtype=np.int64), 2, np.uint64(9), walks)
    first = np.bincount(walks[:, 1], minlength=5)
    assert first[0] == first[4] == 0 and chisquare(first[1:4]).pvalue > 1e-4
    edges = set(zip(*edge_index, strict=True))
    for a, b in zip(walks[:, :-1].ravel(), walks[:, 1:].ravel(), strict=True):
        assert (a, b) in edges or (a == b == 4)


def test_coefficients_equal_a_direct_computation(tmp_path):
    data = id_graph(seed=6)
    loader = GraphSAINTNodeSampler(
        data, batch_size=20, num_steps=5, sample_coverage=10, seed=2, log=False, save_dir=tmp_path
    )
    # Recount from the same subgraphs: the coverage draws are seeded (seed, 2**40, sample).
    node_count = np.zeros(data.num_nodes)
    edge_count = np.zeros(data.num_edges)
    samples = drawn = 0
    while drawn < data.num_nodes * 10:
        for _ in range(5):
            nodes = loader._select(np.random.default_rng([2, 1 << 40, samples]))
            src, dst = data.edge_index.numpy()
            inside = np.isin(src, nodes) & np.isin(dst, nodes)
            node_count[nodes] += 1
            edge_count[inside] += 1
            drawn += nodes.size
            samples += 1
    src = data.edge_index[0].numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        edge_norm = np.clip(node_count[src] / edge_count, 0, 1e4)
    edge_norm[np.isnan(edge_norm)] = 0.1
    node_count[node_count == 0] = 0.1
    np.testing.assert_allclose(loader.node_norm, samples / node_count / data.num_nodes, rtol=1e-6)
    np.testing.assert_allclose(loader.edge_norm, edge_norm, rtol=1e-6)
    batch = next(iter(loader))
    nodes = check_subgraph(batch, data)
    assert torch.equal(batch.node_norm, torch.from_numpy(loader.node_norm)[nodes])
    assert torch.equal(batch.edge_norm, torch.from_numpy(loader.edge_norm)[batch.edge_attr])
    (cached,) = tmp_path.glob("*.npz")
    ones = np.ones(data.num_nodes, np.float32), np.ones(data.num_edges, np.float32)
    np.savez(cached, node_norm=ones[0], edge_norm=ones[1])
    again = GraphSAINTNodeSampler(
        data, batch_size=20, num_steps=5, sample_coverage=10, seed=2, log=False, save_dir=tmp_path
    )
    np.testing.assert_array_equal(again.node_norm, ones[0])  # read, not computed again
    np.testing.assert_array_equal(again.edge_norm, ones[1])


def reversed_edges(data: Data) -> Data:
    """``data`` with its edges (and their ids) in the reverse order: the same graph, whose
    ``edge_norm`` lists the same coefficients in the reverse order."""
    order = torch.arange(data.num_edges - 1, -1, -1)
    return Data(
        x=data.x,
        edge_index=data.edge_index[:, order],
        edge_attr=data.edge_attr[order],
        num_nodes=data.num_nodes,
    )


def test_coefficient_cache_is_keyed_by_the_graph_and_every_argument(tmp_path):
    """One ``save_dir`` for another graph of the same sizes, the same graph's edges in another
    order, other batch sizes, steps, seeds, walk lengths and samplers: each gets the
    coefficients computed for it, as without a cache."""
    data, other = id_graph(seed=6), id_graph(seed=7)
    assert (data.num_nodes, data.num_edges) == (other.num_nodes, other.num_edges)
    assert not torch.equal(data.edge_index, other.edge_index)
    node, walk = GraphSAINTNodeSampler, GraphSAINTRandomWalkSampler
    cases = [
        (node, data, {"batch_size": 20}),
        (node, other, {"batch_size": 20}),
        (node, reversed_edges(data), {"batch_size": 20}),
        (node, data, {"batch_size": 10}),
        (node, data, {"batch_size": 20, "num_steps": 3}),
        (node, data, {"batch_size": 20, "seed": 5}),
        (walk, data, {"batch_size": 10, "walk_length": 2}),
        (walk, data, {"batch_size": 10, "walk_length": 3}),
        (GraphSAINTEdgeSampler, data, {"batch_size": 20}),
    ]
    for sampler, graph, arguments in cases:
        cached = sampler(graph, sample_coverage=5, log=False, save_dir=tmp_path, **arguments)
        fresh = sampler(graph, sample_coverage=5, log=False, **arguments)
        np.testing.assert_array_equal(cached.node_norm, fresh.node_norm)
        np.testing.assert_array_equal(cached.edge_norm, fresh.edge_norm)
    assert len(list(tmp_path.glob("*.npz"))) == len(cases)


@pytest.mark.parametrize(
    ("name", "damage"),
    [
        ("not a zip", b"not an npz"),
        ("cut short", None),
        ("float64", {"node_norm": np.ones(60), "edge_norm": np.ones(400)}),
        ("short", {"node_norm": np.ones(59, np.float32), "edge_norm": np.ones(400, np.float32)}),
        (
            "nan",
            {"node_norm": np.full(60, np.nan, np.float32), "edge_norm": np.ones(400, np.float32)},
        ),
        (
            "negative",
            {"node_norm": np.ones(60, np.float32), "edge_norm": -np.ones(400, np.float32)},
        ),
        ("no edge_norm", {"node_norm": np.ones(60, np.float32)}),
    ],
)
def test_damaged_coefficient_cache_is_computed_again_and_overwritten(
    tmp_path, caplog, name, damage
):
    data = id_graph(seed=6)
    arguments = {"batch_size": 20, "sample_coverage": 5, "log": False}
    fresh = GraphSAINTNodeSampler(data, **arguments)
    GraphSAINTNodeSampler(data, save_dir=tmp_path, **arguments)
    (cached,) = tmp_path.glob("*.npz")
    if damage is None:
        cached.write_bytes(cached.read_bytes()[:-100])
    elif isinstance(damage, bytes):
        cached.write_bytes(damage)
    else:
        np.savez(cached, **damage)
    with caplog.at_level(logging.WARNING):
        redone = GraphSAINTNodeSampler(data, save_dir=tmp_path, **arguments)
    assert f"cache file '{cached}' is not usable" in caplog.text
    np.testing.assert_array_equal(redone.node_norm, fresh.node_norm)
    np.testing.assert_array_equal(redone.edge_norm, fresh.edge_norm)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        GraphSAINTNodeSampler(data, save_dir=tmp_path, **arguments)
    assert not caplog.text  # overwritten with the coefficients computed again


def test_bad_arguments():
    data = id_graph()
    with pytest.raises(ValueError, match="'batch_size' must be an int >= 1"):
        GraphSAINTNodeSampler(data, batch_size=0)
    with pytest.raises(ValueError, match="'walk_length' must be an int >= 0"):
        GraphSAINTRandomWalkSampler(data, batch_size=5, walk_length=-1)
    data.node_norm = torch.ones(data.num_nodes)
    with pytest.raises(ValueError, match="already has 'node_norm'"):
        GraphSAINTNodeSampler(data, batch_size=5)
    with pytest.raises(TypeError, match="does not support"):
        GraphSAINTNodeSampler(id_graph(), batch_size=5, sampler=None)
    no_edges = Data(x=torch.randn(30, 2), edge_index=torch.empty(2, 0, dtype=torch.long))
    for sampler in (GraphSAINTNodeSampler, GraphSAINTEdgeSampler):
        with pytest.raises(ValueError, match="drew no node of this graph"):
            sampler(no_edges, batch_size=5, sample_coverage=2)
    floats = id_graph()
    floats.edge_index = floats.edge_index.float() + 0.7
    with pytest.raises(TypeError, match="integer node ids"):
        GraphSAINTNodeSampler(floats, batch_size=5)


def test_loader_device():
    data = id_graph()
    on_cpu = next(iter(GraphSAINTNodeSampler(data, batch_size=20, seed=3, device="cpu")))
    default = next(iter(GraphSAINTNodeSampler(data, batch_size=20, seed=3)))
    assert torch.equal(on_cpu.edge_index, default.edge_index)
    with pytest.raises(ValueError, match="'device' must be a torch device"):
        GraphSAINTNodeSampler(data, batch_size=20, device="gpu:0")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="needs CUDA"):
            GraphSAINTNodeSampler(data, batch_size=20, device="cuda")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_loader_copies_batches_to_cuda():
    data = id_graph()
    default = next(iter(GraphSAINTNodeSampler(data, batch_size=20, seed=3)))
    loader = GraphSAINTNodeSampler(data, batch_size=20, seed=3, device="cuda", num_workers=1)
    batch = next(iter(loader))
    assert batch.edge_index.is_cuda
    assert torch.equal(batch.edge_index.cpu(), default.edge_index)


def test_edge_selection_draws_as_numpy_choice():
    graph = SaintGraph(id_graph().edge_index.numpy(), 60)
    p = edge_probabilities(graph)
    ours = edge_selection(graph, 500, np.random.default_rng(4), cumulative_probabilities(p))
    edges = np.random.default_rng(4).choice(graph.num_edges, size=500, p=p)
    assert np.array_equal(ours, np.unique(np.concatenate([graph.col[edges], graph.row[edges]])))
