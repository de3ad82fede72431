"""Layer-wise full-neighbor inference: each layer over all nodes, in large chunks.

As in PyG's GraphSAGE examples (``BasicGNN.inference``): instead of sampling a
multi-hop neighborhood per batch, layer ``l`` is computed for every node from all
its in-neighbors' layer ``l - 1`` outputs, so each node's embedding is computed once
per layer and evaluation is exact (no sampling noise).
"""

from __future__ import annotations

import torch
from torch_geometric.nn.models.basic_gnn import BasicGNN
from tqdm import tqdm

from graphengine.batch.blocks import to_blocks
from graphengine.data.feature_store import FeatureStore
from graphengine.data.graph_store import Graph
from graphengine.loader import NeighborLoader
from graphengine.nn.blocks import block_conv, supports_layerwise
from graphengine.nn.gat_blocks import fuses_gat, gat_block


@torch.no_grad()
def layerwise_inference(
    model: BasicGNN,
    graph: Graph,
    x: torch.Tensor,
    chunk_size: int = 8192,
    device: torch.device | str = "cpu",
    progress: bool = False,
) -> torch.Tensor:
    """The model's output for every node: float32 ``[num_nodes, out_channels]`` on the CPU.

    Args:
        model: a PyG ``BasicGNN`` (see :func:`~graphengine.nn.blocks.supports_layerwise`), in
            eval mode.
        graph: the CSC graph.
        x: ``[num_nodes, in_channels]`` input features (a CPU tensor; memory maps work).
        chunk_size: destination nodes per step.
        device: where each chunk's layer runs.
    """
    if not supports_layerwise(model):
        raise ValueError(
            "layer-wise inference needs a PyG BasicGNN without norms, jumping knowledge or "
            f"degree-normalizing GCN layers (got {type(model).__name__})"
        )
    if model.training:
        raise ValueError("call model.eval() before layer-wise inference")
    hidden = x
    for layer, conv in enumerate(model.convs):
        store = FeatureStore({"h": hidden})
        loader = NeighborLoader(
            (store, graph), [-1], batch_size=chunk_size, num_workers=1, prefetch=2
        )
        outputs = []
        for batch in tqdm(loader, desc=f"layer {layer + 1}", disable=not progress, leave=False):
            h = batch.h.to(device, torch.float32)
            edge_index = batch.edge_index.to(device)
            (block,) = to_blocks(edge_index, batch.num_sampled_nodes, batch.num_sampled_edges)
            if fuses_gat(conv, h):
                out = gat_block(conv, h[: block.num_src], block)
            else:
                out = block_conv(conv, h, block)
            if layer < model.num_layers - 1:
                out = model.act(out) if model.act is not None else out
            outputs.append(out.cpu())
        hidden = torch.cat(outputs)
    return hidden
