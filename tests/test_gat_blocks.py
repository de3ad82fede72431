"""PyG's GAT on blocks without per-edge messages: outputs and gradients against PyG's own
forward on the whole batch, on a multigraph with self loops."""

import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.nn import GAT, GATConv, GATv2Conv

from graphengine import NeighborLoader
from graphengine.nn.blocks import block_forward, to_blocks
from graphengine.nn.gat_blocks import _EdgeWeightedSum, _LoopedEdges, fuses_gat


def multigraph_batch(fanouts=(5, 4, 3), batch_size=64):
    generator = torch.Generator().manual_seed(0)
    num_nodes = 1500
    edge_index = torch.randint(0, num_nodes, (2, 15_000), generator=generator)
    edge_index[1, :200] = edge_index[0, :200]  # self loops, which PyG's GATConv replaces
    edge_index[:, 200:400] = edge_index[:, 400:600]  # repeated edges
    data = Data(x=torch.randn(num_nodes, 12, generator=generator), edge_index=edge_index)
    data.num_nodes = num_nodes
    return next(iter(NeighborLoader(data, list(fanouts), batch_size=batch_size)))


@pytest.mark.parametrize("heads", [1, 3])
def test_gat_on_blocks_equals_pyg_on_the_whole_batch(heads):
    batch = multigraph_batch()
    torch.manual_seed(0)
    model = GAT(12, 24, 3, 5, heads=heads).eval()
    x = batch.x.clone().requires_grad_()
    expected = model(x, batch.edge_index)[: batch.batch_size]
    expected.square().sum().backward()
    expected_grads = [x.grad.clone()] + [p.grad.clone() for p in model.parameters()]
    x.grad = None
    model.zero_grad()
    blocks = to_blocks(batch.edge_index, batch.num_sampled_nodes, batch.num_sampled_edges)
    got = block_forward(model, x, blocks)
    got.square().sum().backward()
    assert torch.allclose(got, expected, atol=1e-5)
    grads = [x.grad] + [p.grad for p in model.parameters()]
    for grad, expected_grad in zip(grads, expected_grads, strict=True):
        assert torch.allclose(grad, expected_grad, atol=1e-4)


def test_edge_weighted_sum_gradients_match_finite_differences():
    batch = multigraph_batch(fanouts=(4,), batch_size=16)
    block = to_blocks(batch.edge_index, batch.num_sampled_nodes, batch.num_sampled_edges)[0]
    edges = _LoopedEdges(block)
    weight = torch.rand(edges.source.numel(), dtype=torch.float64, requires_grad=True)
    x = torch.randn(block.num_src, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda w, v: _EdgeWeightedSum.apply(w, v, edges), (weight, x))


def test_looped_edges_drop_self_loops_and_add_one_per_destination():
    batch = multigraph_batch(fanouts=(4,), batch_size=32)
    block = to_blocks(batch.edge_index, batch.num_sampled_nodes, batch.num_sampled_edges)[0]
    edges = _LoopedEdges(block)
    got = sorted(zip(edges.target.tolist(), edges.source.tolist(), strict=True))
    source, target = block.edge_index
    kept = source != target
    expected = list(zip(target[kept].tolist(), source[kept].tolist(), strict=True))
    expected += [(i, i) for i in range(block.num_dst)]
    assert got == sorted(expected)
    assert torch.equal(edges.target, edges.target.sort().values)  # grouped by destination
    assert edges.rowptr[-1] == len(expected)


def test_layers_it_cannot_compute_are_left_to_pyg():
    assert fuses_gat(GATConv(4, 3, heads=2))
    assert not fuses_gat(GATConv(4, 3, edge_dim=2))
    assert not fuses_gat(GATConv(4, 3, residual=True))
    assert not fuses_gat(GATConv(4, 3, add_self_loops=False))
    assert not fuses_gat(GATConv((4, 5), 3))
    assert not fuses_gat(GATv2Conv(4, 3))
