"""Running a PyG model on message-flow blocks (:mod:`graphengine.batch.blocks`).

PyG's ``trim_to_layer`` drops the edges a layer does not need but still computes every
layer for all ``num_src`` nodes; running each layer bipartite
(``conv((x[:num_src], x[:num_dst]), adjacency)``, as PyG's older ``NeighborSampler``
examples and DGL's blocks do) computes outputs only for the ``num_dst`` nodes the next
layer reads, with the same results and far less work (the comparison of the forward modes
is in docs/benchmarks.md, ``bench train --forward``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch_geometric.nn import GATConv, GATv2Conv, GCNConv, GINConv, SAGEConv
from torch_geometric.nn.models.basic_gnn import BasicGNN

from graphengine.batch.blocks import Block
from graphengine.nn.aggregation import IndexedRows
from graphengine.nn.fused_sage import ReluLink, fuses, sage_mean
from graphengine.nn.gat_blocks import fuses_gat, gat_block
from graphengine.nn.gcn_blocks import batch_degree_scale, fuses_gcn, gcn_block

# Layers that take ``(x_src, x_dst)`` pairs, computing outputs for the destinations only.
_BIPARTITE_CONVS = (SAGEConv, GINConv, GATConv, GATv2Conv)


def normalizes_by_degree(model: torch.nn.Module) -> bool:
    """Whether ``model`` has a ``GCNConv`` that normalizes by node degrees: computed on a
    subgraph, those degrees differ from the graph's, so neither trimming layers nor
    layer-wise inference give the same results for it (blocks do, given the batch's degrees:
    :mod:`graphengine.nn.gcn_blocks`)."""
    return any(isinstance(m, GCNConv) and m.normalize for m in model.modules())


def supports_blocks(model: torch.nn.Module, num_hops: int | None = None) -> bool:
    """Whether :func:`block_forward` gives ``model``'s results on a sampled batch: a PyG
    ``BasicGNN`` (with ``num_hops`` layers, when given) without norms or jumping knowledge
    (whose statistics or inputs would cover other nodes), whose degree-normalizing layers
    are ``GCNConv`` s that :func:`~graphengine.nn.gcn_blocks.fuses_gcn` computes."""
    return (
        isinstance(model, BasicGNN)
        and (num_hops is None or model.num_layers == num_hops)
        and model.jk_mode is None
        and all(isinstance(norm, torch.nn.Identity) for norm in model.norms)
        and all(fuses_gcn(m) for m in model.modules() if isinstance(m, GCNConv) and m.normalize)
    )


def supports_layerwise(model: torch.nn.Module) -> bool:
    """Whether layer-wise inference (each layer over all nodes, in chunks of blocks) gives
    ``model``'s results: :func:`supports_blocks`, without degree normalization (a chunk's
    sources do not bring their degrees)."""
    return supports_blocks(model) and not normalizes_by_degree(model)


def block_conv(conv: torch.nn.Module, x: torch.Tensor, block: Block) -> torch.Tensor:
    """One layer on one block: ``x`` ``[>= num_src, in]`` -> ``[num_dst, out]``.

    Bipartite-capable layers (GraphSAGE, GIN, GAT) compute the destinations only; with a
    fused aggregation (``conv.fuse``: GraphSAGE's mean, GIN's sum) on the CSR adjacency,
    else on ``edge_index``. Other layers run on all ``num_src`` nodes, then are sliced.
    """
    # A slice's gradient is a zero-filled tensor of x's size: skip the slice when it is all of x.
    x_src = x if x.shape[0] == block.num_src else x[: block.num_src]
    if not isinstance(conv, _BIPARTITE_CONVS):
        return conv(x_src, block.edge_index)[: block.num_dst]
    return conv((x_src, x[: block.num_dst]), _adjacency(conv, block, x))


def _adjacency(conv: torch.nn.Module, block: Block, x: torch.Tensor) -> torch.Tensor:
    """The CSR adjacency where ``conv`` fuses its aggregation and ``torch.sparse.mm`` has that
    reduction on ``x``'s device (CUDA has only sum, and mean through it), else ``edge_index``."""
    aggregation = getattr(conv, "aggr", None)
    on_csr = getattr(conv, "fuse", False) and (
        x.device.type == "cpu" or aggregation in ("add", "sum", "mean")
    )
    return block.csr(x.dtype) if on_csr else block.edge_index


def block_forward(
    model: BasicGNN, x: torch.Tensor | IndexedRows, blocks: Sequence[Block], fused: bool = True
) -> torch.Tensor:
    """``model``'s output for the last block's destinations (the seeds):
    ``[blocks[-1].num_dst, out_channels]``, from ``x`` ``[num_nodes, in_channels]``.

    The same as ``model(x, edge_index)[:num_seeds]`` (see :func:`supports_blocks`; ``x`` the
    whole batch's features, ``blocks`` all of the batch's), with dropout applied to the rows
    each layer computes. GCN layers get the batch's degrees from ``blocks[0]``
    (:mod:`graphengine.nn.gcn_blocks`). With ``fused``, GraphSAGE's mean layers (and a ReLU
    after them) run as one autograd node each (:mod:`graphengine.nn.fused_sage`) and GAT's
    attention without per-edge messages on the CPU (:mod:`graphengine.nn.gat_blocks`): the
    same math in fewer passes over memory (GAT's attention dropout draws its own masks).
    ``x`` may be :class:`~graphengine.nn.aggregation.IndexedRows`: a fused GraphSAGE first
    layer reads its rows from the table; other layers get them gathered.
    """
    if len(blocks) != model.num_layers:
        raise ValueError(f"{model.num_layers} layers need as many blocks (got {len(blocks)})")
    last = model.num_layers - 1
    scale = None  # GCN's batch degrees, once a GCN layer needs them
    if isinstance(x, IndexedRows) and not (fused and fuses(model.convs[0])):
        x = x.gather()  # only the fused mean layer reads rows from the table
    link = None  # the ReLU before this layer, when this layer applies it
    for layer, (conv, block) in enumerate(zip(model.convs, blocks, strict=True)):
        x_src = x if x.shape[0] == block.num_src else x[: block.num_src]
        relu = False  # whether the layer applies the ReLU after it itself
        relu_follows = layer < last and isinstance(model.act, torch.nn.ReLU)
        if fused and fuses(conv):
            relu = relu_follows
            output_link = ReluLink() if relu and fuses(model.convs[layer + 1]) else None
            x = sage_mean(conv, x_src, block, relu, input_relu=link, output_relu=output_link)
            link = output_link
        elif fused and fuses_gat(conv, x_src):
            x = gat_block(conv, x_src, block)
        elif fuses_gcn(conv):
            if scale is None:
                scale = batch_degree_scale(blocks[0], blocks[0].num_src)
            relu = relu_follows
            x = gcn_block(conv, x_src, block, scale, relu)
        else:
            x = block_conv(conv, x, block)
        if layer < last:
            if not relu and model.act is not None:
                x = model.act(x)
            x = model.dropout(x)
    return x
