"""GAT's attention kernel on blocks: results and gradients against PyG's own GATConv on the
same block, attention dropout against a brute-force reference with the same masks, bad input."""

import pytest
import torch
import torch.nn.functional as F
from torch_geometric.nn import GAT, GATConv
from torch_geometric.utils import scatter, softmax

from graphengine import NeighborLoader, ops
from graphengine.batch.blocks import Block, to_blocks
from graphengine.datasets import SyntheticSpec, generate
from graphengine.nn.blocks import block_conv, block_forward
from graphengine.nn.gat_blocks import _Attention, fuses_gat, gat_block
from tests.helpers.autograd_checks import assert_same_outputs_and_grads

pytestmark = pytest.mark.skipif(
    not ops.build_extension(), reason="graphengine's C++ extension is not built"
)


def random_block(num_src=40, num_dst=12, num_edges=120, seed=0) -> Block:
    """A block with repeated edges, edges from a destination to itself (which GAT's self loops
    replace) and two destinations without any edge."""
    generator = torch.Generator().manual_seed(seed)
    target = torch.randint(0, num_dst - 2, (num_edges,), generator=generator).sort().values
    source = torch.randint(0, num_src, (num_edges,), generator=generator)
    source[::7] = target[::7]
    edge_index = torch.stack([source, target])
    return to_blocks(edge_index, [num_dst, num_src - num_dst], [num_edges])[0]


@pytest.mark.parametrize("concat", [True, False], ids=["concat", "mean"])
@pytest.mark.parametrize("self_loops", [True, False], ids=["loops", "no-loops"])
@pytest.mark.parametrize(
    "extra", [{}, {"residual": True}, {"bias": False}], ids=["plain", "res", "no-bias"]
)
def test_equals_pyg_gatconv_on_the_block(concat, self_loops, extra):
    torch.manual_seed(0)
    block = random_block()
    conv = GATConv(6, 5, heads=3, concat=concat, add_self_loops=self_loops, **extra)
    x = torch.randn(block.num_src, 6, requires_grad=True)
    assert fuses_gat(conv, x)
    assert_same_outputs_and_grads(
        lambda: gat_block(conv, x, block),
        lambda: block_conv(conv, x, block),
        [x, *conv.parameters()],
    )


def test_attention_dropout_against_brute_force_with_the_same_masks():
    torch.manual_seed(0)
    block = random_block()
    heads, channels = 2, 4
    h = torch.randn(block.num_src, heads, channels, requires_grad=True)
    att_src = torch.randn(heads, channels, requires_grad=True)
    att_dst = torch.randn(heads, channels, requires_grad=True)
    num_edges = block.edge_index.shape[1]
    dropout = F.dropout(torch.ones(num_edges + block.num_dst, heads), 0.5)
    source, target = block.edge_index
    kept = source != target  # the block's own self loops, replaced by one per destination
    loops = torch.arange(block.num_dst)
    source = torch.cat([source[kept], loops])
    target = torch.cat([target[kept], loops])
    kept_dropout = torch.cat([dropout[:num_edges][kept], dropout[num_edges:]])

    def reference():
        logits = (h[source] * att_src).sum(-1) + (h[target] * att_dst).sum(-1)
        alpha = softmax(F.leaky_relu(logits, 0.2), target, num_nodes=block.num_dst)
        messages = (alpha * kept_dropout)[..., None] * h[source]
        return scatter(messages, target, 0, block.num_dst, reduce="sum")

    def kernel():
        return _Attention.apply(h, att_src, att_dst, block, 0.2, True, dropout)

    for run in (reference, kernel):
        out = run()
        grads = torch.autograd.grad(out.square().sum(), [h, att_src, att_dst])
        if run is reference:
            expected, expected_grads = out, grads
    assert torch.allclose(out, expected, atol=1e-6)
    for grad, expected_grad in zip(grads, expected_grads, strict=True):
        assert torch.allclose(grad, expected_grad, atol=1e-5)


def test_block_forward_trains_gat_with_attention_dropout():
    dataset = generate("t", SyntheticSpec(2000, 20_000, 6, 3, 1000, 200))
    batch = next(iter(NeighborLoader(dataset, [5, 3], batch_size=32)))
    blocks = to_blocks(batch.edge_index, batch.num_sampled_nodes, batch.num_sampled_edges)
    torch.manual_seed(0)
    model = GAT(6, 8, 2, 3, heads=2, dropout=0.5).train()
    out = block_forward(model, batch.x, blocks)
    out.sum().backward()
    assert out.shape == (32, 3)
    assert all(p.grad is not None and p.grad.isfinite().all() for p in model.parameters())
    model.eval()
    assert torch.allclose(
        block_forward(model, batch.x, blocks),
        block_forward(model, batch.x, blocks, fused=False),
        atol=1e-5,
    )


def test_autocast_projects_in_its_dtype_and_attends_in_float32():
    torch.manual_seed(0)
    block = random_block()
    conv = GATConv(6, 5, heads=3)
    x = torch.randn(block.num_src, 6)
    expected = block_conv(conv, x, block)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = gat_block(conv, x, block)
    assert got.dtype == torch.float32
    assert torch.allclose(got, expected, atol=0.05, rtol=0.02)
    got.sum().backward()
    assert all(p.grad.dtype == torch.float32 for p in conv.parameters())


def test_layers_it_cannot_compute_run_as_pyg_does():
    x = torch.randn(4, 6)
    assert not fuses_gat(GATConv((6, 6), 5), x)  # separate source and destination projections
    assert not fuses_gat(GATConv(6, 5, edge_dim=2), x)
    assert not fuses_gat(GATConv(6, 5), x.double())
    previous = ops.set_backend("torch")
    try:
        assert not fuses_gat(GATConv(6, 5), x)
    finally:
        ops.set_backend(previous)


def test_bad_input_is_refused_with_the_value():
    block = random_block()
    with pytest.raises(ValueError, match="must have the block's 40 source rows"):
        gat_block(GATConv(6, 4), torch.randn(39, 6), block)
    h, att = torch.randn(block.num_src, 2, 3), torch.randn(2, 3)
    col = block.edge_index[0].clone()
    col[5] = 40
    attention = torch.ops.graphengine.gat_attention
    with pytest.raises(IndexError, match="holds source 40 at position 5, outside"):
        attention(h, att, att, block.rowptr, col, 0.2, True)
    with pytest.raises(RuntimeError, match="'att_dst' must be contiguous float32"):
        attention(h, att, att.double(), block.rowptr, block.edge_index[0], 0.2, True)
    rowptr = block.rowptr.clone()
    rowptr[-1] = 119
    with pytest.raises(RuntimeError, match=r"'rowptr' must run from 0 to 120 \(got 0 to 119\)"):
        attention(h, att, att, rowptr, block.edge_index[0], 0.2, True)
