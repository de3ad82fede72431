"""The fused GraphSAGE mean layer: gradients by finite differences, results and gradients
against PyG's own SAGEConv on the same block."""

import pytest
import torch
from torch_geometric.nn import GraphSAGE, SAGEConv

from graphengine import NeighborLoader
from graphengine.batch.blocks import Block, to_blocks
from graphengine.datasets import SyntheticSpec, generate
from graphengine.nn import dense
from graphengine.nn.aggregation import mean_adjacency
from graphengine.nn.blocks import block_conv, block_forward
from graphengine.nn.fused_sage import FusedSageMean, ReluLink, fuses, sage_mean
from tests.helpers.autograd_checks import assert_same_outputs_and_grads


def random_block(num_src=40, num_dst=12, num_edges=90, seed=0) -> Block:
    """A block with repeated edges and destinations without any (degree 0)."""
    generator = torch.Generator().manual_seed(seed)
    target = torch.randint(0, num_dst - 2, (num_edges,), generator=generator).sort().values
    source = torch.randint(0, num_src, (num_edges,), generator=generator)
    edge_index = torch.stack([source, target])
    nodes = [num_dst, num_src - num_dst]
    return to_blocks(edge_index, nodes, [num_edges])[0]


def test_gradients_match_finite_differences():
    block = random_block()
    x = torch.randn(block.num_src, 5, dtype=torch.float64, requires_grad=True)
    weight_l = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(3, dtype=torch.float64, requires_grad=True)
    weight_r = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    adjacency = mean_adjacency(block, torch.float64)
    for relu in (False, True):
        assert torch.autograd.gradcheck(
            lambda *args, r=relu: FusedSageMean.apply(*args, adjacency, r, None, None),
            (x, weight_l, bias, weight_r),
        )


def test_a_relu_backward_handed_to_the_next_layer_matches_finite_differences():
    first, second = random_block(num_src=40, num_dst=25), random_block(num_src=25, num_dst=9)
    x = torch.randn(first.num_src, 5, dtype=torch.float64, requires_grad=True)
    weights = [
        torch.randn(*shape, dtype=torch.float64, requires_grad=True)
        for shape in [(4, 5), (4,), (4, 5), (3, 4), (3,), (3, 4)]
    ]
    adjacencies = [mean_adjacency(b, torch.float64) for b in (first, second)]

    def two_layers(x, *weights):
        link = ReluLink()
        hidden = FusedSageMean.apply(x, *weights[:3], adjacencies[0], True, None, link)
        return FusedSageMean.apply(hidden, *weights[3:], adjacencies[1], False, link, None)

    assert torch.autograd.gradcheck(two_layers, (x, *weights))


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("relu", [True, False], ids=["relu", "linear"])
@pytest.mark.parametrize("block_rows", [None, 5], ids=["mm-weight-grad", "blocked-weight-grad"])
def test_equals_pyg_sageconv_on_the_block(bias, relu, block_rows, monkeypatch):
    if block_rows is not None:  # 12 destinations: blocks of 5, 5 and 2 rows
        monkeypatch.setattr(dense, "BLOCK_ROWS", block_rows)
        monkeypatch.setattr(dense, "BLOCKED_FROM_ROWS", block_rows)
    torch.manual_seed(0)
    block = random_block()
    conv = SAGEConv(6, 4, bias=bias)
    assert fuses(conv)
    x = torch.randn(block.num_src, 6, requires_grad=True)

    def pyg():
        out = block_conv(conv, x, block)
        return out.relu() if relu else out

    assert_same_outputs_and_grads(
        lambda: sage_mean(conv, x, block, relu=relu),
        pyg,
        [x, *conv.parameters()],
    )


def test_layers_it_cannot_compute_run_as_pyg_does():
    assert not fuses(SAGEConv(6, 4, aggr="max"))
    assert not fuses(SAGEConv(6, 4, project=True))
    assert not fuses(SAGEConv(6, 4, normalize=True))
    assert not fuses(SAGEConv(6, 4, root_weight=False))
    torch.manual_seed(0)
    block = random_block()
    model = GraphSAGE(6, 8, 1, 4, project=True)
    x = torch.randn(block.num_src, 6)
    expected = model.convs[0]((x, x[: block.num_dst]), block.edge_index)
    assert torch.allclose(block_forward(model, x, [block]), expected, atol=1e-6)


def test_dropout_and_other_activations_follow_the_fused_layer():
    dataset = generate("t", SyntheticSpec(2000, 20_000, 6, 3, 1000, 200))
    batch = next(iter(NeighborLoader(dataset, [5, 3, 2], batch_size=32, seed=0)))
    blocks = to_blocks(batch.edge_index, batch.num_sampled_nodes, batch.num_sampled_edges)

    def seeded_forward(model, fused):
        torch.manual_seed(1)  # the same dropout masks
        return block_forward(model, batch.x, blocks, fused=fused)

    for act in ("relu", "tanh"):
        torch.manual_seed(0)
        model = GraphSAGE(6, 8, 3, 3, act=act, dropout=0.5).train()
        assert_same_outputs_and_grads(  # with ReLU, layers 2 and 3 do their input's backward
            lambda m=model: seeded_forward(m, True),
            lambda m=model: seeded_forward(m, False),
            list(model.parameters()),
        )


def test_rejects_rows_that_are_not_the_block_sources():
    block = random_block()
    with pytest.raises(ValueError, match="must have the block's 40 source rows"):
        sage_mean(SAGEConv(6, 4), torch.randn(39, 6), block)
    with pytest.raises(ValueError, match="'output_relu' needs 'relu'"):
        sage_mean(SAGEConv(6, 4), torch.randn(40, 6), block, output_relu=ReluLink())


def test_without_autograd_the_layers_compute_the_same_outputs():
    """Under no_grad the linked layers (a ReLU applied as the next layer reads its rows)
    compute what they compute while autograd records."""
    dataset = generate("t", SyntheticSpec(2000, 20_000, 6, 3, 1000, 200))
    batch = next(iter(NeighborLoader(dataset, [5, 3, 2], batch_size=32, seed=0)))
    blocks = to_blocks(batch.edge_index, batch.num_sampled_nodes, batch.num_sampled_edges)
    torch.manual_seed(0)
    model = GraphSAGE(6, 8, 3, 3).eval()
    with torch.no_grad():
        inference = block_forward(model, batch.x, blocks)
    assert torch.equal(inference, block_forward(model, batch.x, blocks).detach())


def test_autocast_computes_in_its_dtype_and_returns_float32_gradients():
    torch.manual_seed(0)
    block = random_block()
    conv = SAGEConv(6, 4)
    x = torch.randn(block.num_src, 6)
    expected = block_conv(conv, x, block)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = sage_mean(conv, x, block)
    assert got.dtype == torch.bfloat16
    assert torch.allclose(got.float(), expected, atol=0.05, rtol=0.02)
    got.float().sum().backward()
    assert all(p.grad.dtype == torch.float32 for p in conv.parameters())
