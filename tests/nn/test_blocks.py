"""Message-flow blocks: structure against a brute-force split, outputs and gradients
against PyG's own forward on the whole batch."""

import pytest
import torch
from torch_geometric.nn import GAT, GCN, GIN, GCNConv, GraphSAGE

from graphengine import NeighborLoader
from graphengine.batch.blocks import to_blocks
from graphengine.datasets import SyntheticSpec, generate
from graphengine.nn.blocks import block_conv, block_forward, supports_blocks, supports_layerwise
from graphengine.nn.forward import SeedLogits
from tests.helpers.autograd_checks import assert_same_outputs_and_grads


@pytest.fixture(scope="module")
def batch():
    dataset = generate("t", SyntheticSpec(3000, 40_000, 8, 3, 1500, 300))
    loader = NeighborLoader(
        dataset, [6, 4, 3], batch_size=64, input_nodes=dataset.train_idx, seed=0
    )
    return next(iter(loader))


def test_blocks_split_the_batch_by_hop(batch):
    col = batch.edge_index[1]
    counts = batch.num_sampled_nodes
    blocks = to_blocks(batch.edge_index, counts, batch.num_sampled_edges)
    assert len(blocks) == 3
    for layer, block in enumerate(blocks):
        hops = 3 - layer
        assert block.num_src == sum(counts[: hops + 1])
        assert block.num_dst == sum(counts[:hops])
        into_dst = (col < block.num_dst).nonzero().flatten()
        assert torch.equal(block.edge_index, batch.edge_index[:, into_dst])
        assert int(block.edge_index[0].max()) < block.num_src
        expected_ptr = torch.tensor(
            [int((col[into_dst] < d).sum()) for d in range(block.num_dst + 1)]
        )
        assert torch.equal(block.rowptr, expected_ptr)
        dense = torch.zeros(block.num_dst, block.num_src)
        dense.index_put_((block.edge_index[1], block.edge_index[0]), torch.tensor(1.0))
        assert torch.equal(block.csr(torch.float32).to_dense(), dense)
    assert blocks[-1].num_dst == batch.batch_size


@pytest.mark.parametrize(
    "model_class",
    [GraphSAGE, GAT, GIN, lambda *a: GraphSAGE(*a, aggr="max"), lambda *a: GAT(*a, v2=True)],
    ids=["sage", "gat", "gin", "sage-max", "gatv2"],
)
def test_block_forward_equals_whole_batch_forward(batch, model_class):
    torch.manual_seed(0)
    model = model_class(8, 16, 3, 3).eval()
    assert supports_blocks(model, 3)
    seeds = batch.batch_size
    blocks = to_blocks(batch.edge_index, batch.num_sampled_nodes, batch.num_sampled_edges)
    assert block_forward(model, batch.x, blocks).shape == (seeds, 3)
    assert_same_outputs_and_grads(
        lambda: block_forward(model, batch.x, blocks),
        lambda: model(batch.x, batch.edge_index)[:seeds],
        list(model.parameters()),
    )


def test_block_conv_slices_layers_that_are_not_bipartite(batch):
    torch.manual_seed(0)
    conv = GCNConv(8, 5, normalize=False)
    block = to_blocks(batch.edge_index, batch.num_sampled_nodes, batch.num_sampled_edges)[0]
    expected = conv(batch.x, batch.edge_index)[: block.num_dst]
    assert torch.allclose(block_conv(conv, batch.x, block), expected, atol=1e-5)


def test_supports_blocks():
    assert supports_blocks(GCN(8, 16, 2, 3))  # with the batch's degrees (gcn_blocks)
    assert not supports_layerwise(GCN(8, 16, 2, 3))
    assert not supports_blocks(GCN(8, 16, 2, 3, cached=True))
    assert supports_blocks(GCN(8, 16, 2, 3, normalize=False))
    assert supports_layerwise(GCN(8, 16, 2, 3, normalize=False))
    assert not supports_blocks(GraphSAGE(8, 16, 2, 3, jk="cat"))
    assert not supports_blocks(GraphSAGE(8, 16, 2, 3, norm="batch_norm"))
    assert not supports_blocks(GraphSAGE(8, 16, 2, 3), num_hops=3)
    assert not supports_blocks(torch.nn.Linear(8, 3))


def test_seed_logits_picks_blocks_then_trimming(batch):
    assert SeedLogits(GraphSAGE(8, 16, 3, 3), 3).mode == "blocks"
    assert SeedLogits(GraphSAGE(8, 16, 3, 3, norm="batch_norm"), 3).mode == "trim"
    assert SeedLogits(GCN(8, 16, 3, 3), 3).mode == "blocks"
    assert SeedLogits(GCN(8, 16, 3, 3, improved=True), 3).mode == "whole"
    torch.manual_seed(0)
    model = GraphSAGE(8, 16, 3, 3, norm="batch_norm").eval()
    expected = model(batch.x, batch.edge_index)[: batch.batch_size]
    assert torch.allclose(SeedLogits(model, 3)(batch), expected, atol=1e-5)


def test_to_blocks_rejects_inconsistent_batches(batch):
    edge_index, nodes, edges = batch.edge_index, batch.num_sampled_nodes, batch.num_sampled_edges
    with pytest.raises(ValueError, match="needs 4 counts for 3 hops"):
        to_blocks(edge_index, nodes[:-1], edges)
    with pytest.raises(ValueError, match="the hop counts"):
        to_blocks(edge_index, nodes, [edges[0], edges[1], edges[2] + 1])
    with pytest.raises(ValueError, match="sorted by destination"):
        to_blocks(edge_index.flip(1), nodes, edges)
    with pytest.raises(ValueError, match="must be exactly those into the first"):
        to_blocks(edge_index, nodes, [edges[0] + 1, edges[1] - 1, edges[2]])
    with pytest.raises(ValueError, match=r"must be \[2, num_edges\]"):
        to_blocks(edge_index[0], nodes, edges)


def test_seed_logits_refuses_a_forward_the_model_does_not_allow():
    with pytest.raises(ValueError, match="'forward' 'blocks' does not give"):
        SeedLogits(GraphSAGE(8, 16, 2, 3, jk="cat"), 2, forward="blocks")
    with pytest.raises(ValueError, match="'forward' 'trim' does not give"):
        SeedLogits(GCN(8, 16, 2, 3), 2, forward="trim")
    with pytest.raises(ValueError, match="'forward' must be one of"):
        SeedLogits(GCN(8, 16, 2, 3), 2, forward="fast")
    assert SeedLogits(GraphSAGE(8, 16, 2, 3), 2, forward="trim").mode == "trim"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")
@pytest.mark.parametrize("aggr", ["mean", "max"])
def test_block_forward_on_cuda_equals_whole_batch_forward(batch, aggr):
    torch.manual_seed(0)
    model = GraphSAGE(8, 16, 3, 3, aggr=aggr).eval().cuda()
    batch = batch.to("cuda")
    expected = model(batch.x, batch.edge_index)[: batch.batch_size]
    blocks = to_blocks(batch.edge_index, batch.num_sampled_nodes, batch.num_sampled_edges)
    assert torch.allclose(block_forward(model, batch.x, blocks), expected, atol=1e-5)
