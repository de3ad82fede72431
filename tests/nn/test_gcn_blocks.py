"""PyG's GCN on blocks with the batch's degrees: outputs and gradients against PyG's own
forward on the whole batch."""

import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.nn import GCN, GCNConv

from graphengine import NeighborLoader
from graphengine.batch.blocks import to_blocks
from graphengine.nn.blocks import block_forward
from graphengine.nn.gcn_blocks import batch_degree_scale, fuses_gcn
from tests.helpers.autograd_checks import assert_same_outputs_and_grads


def graph_with_self_loops(num_nodes=2000, num_edges=20_000, channels=24) -> Data:
    generator = torch.Generator().manual_seed(0)
    edge_index = torch.randint(0, num_nodes, (2, num_edges), generator=generator)
    edge_index[1, :300] = edge_index[0, :300]  # self loops, which gcn_norm replaces
    return Data(
        x=torch.randn(num_nodes, channels, generator=generator),
        edge_index=edge_index,
        num_nodes=num_nodes,
    )


@pytest.mark.parametrize(
    "fanouts, batch_size, sizes",
    [
        ([5, 4, 3], 64, (24, 32, 3, 6)),  # more sources than destinations: aggregate first
        ([-1], 2000, (24, 8, 1, 4)),  # every node a seed, wide to narrow: linear first
        ([-1, -1], 2000, (24, 8, 2, 4)),  # the same, then ReLU and a second layer
    ],
    ids=["sampled", "all-seeds", "all-seeds-2-layers"],
)
def test_gcn_on_blocks_equals_pyg_on_the_whole_batch(fanouts, batch_size, sizes):
    data = graph_with_self_loops()
    batch = next(iter(NeighborLoader(data, fanouts, batch_size=batch_size)))
    torch.manual_seed(0)
    model = GCN(*sizes)
    x = batch.x.clone().requires_grad_()
    blocks = to_blocks(batch.edge_index, batch.num_sampled_nodes, batch.num_sampled_edges)
    assert_same_outputs_and_grads(
        lambda: block_forward(model, x, blocks),
        lambda: model(x, batch.edge_index)[:batch_size],
        [x, *model.parameters()],
    )


def test_degree_scale_counts_batch_in_edges_without_self_loops():
    data = graph_with_self_loops()
    batch = next(iter(NeighborLoader(data, [5, 4], batch_size=32)))
    blocks = to_blocks(batch.edge_index, batch.num_sampled_nodes, batch.num_sampled_edges)
    num_nodes = batch.num_nodes
    source, target = batch.edge_index
    kept = source != target
    expected = (torch.bincount(target[kept], minlength=num_nodes) + 1.0).rsqrt()
    assert torch.allclose(batch_degree_scale(blocks[0], num_nodes), expected)


def test_layers_it_cannot_compute_are_left_to_pyg():
    assert fuses_gcn(GCNConv(4, 3))
    assert not fuses_gcn(GCNConv(4, 3, improved=True))
    assert not fuses_gcn(GCNConv(4, 3, cached=True))
    assert not fuses_gcn(GCNConv(4, 3, add_self_loops=False))
