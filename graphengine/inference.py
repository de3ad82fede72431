"""Layer-wise full-neighbor inference: each layer over all nodes, in large chunks.

As in PyG's GraphSAGE examples (``BasicGNN.inference``): instead of sampling a
multi-hop neighborhood per batch, layer ``l`` is computed for every node from all
its in-neighbors' layer ``l - 1`` outputs, so each node's embedding is computed once
per layer and evaluation is exact (no sampling noise).
"""

from __future__ import annotations

import torch
from torch_geometric.nn import GCNConv
from torch_geometric.nn.models.basic_gnn import BasicGNN
from tqdm import tqdm

from graphengine.feature_store import FeatureStore
from graphengine.graph import Graph
from graphengine.loader import NeighborLoader


def normalizes_by_degree(model: torch.nn.Module) -> bool:
    """Whether ``model`` has a ``GCNConv`` that normalizes by node degrees: computed on a
    subgraph, those degrees differ from the graph's, so neither trimming layers nor
    layer-wise inference gives the same results for it."""
    return any(isinstance(m, GCNConv) and m.normalize for m in model.modules())


def supports_layerwise(model: torch.nn.Module) -> bool:
    """Whether :func:`layerwise_inference` can run ``model``: a PyG ``BasicGNN`` whose
    layers are only convolutions and activations (no norms, no jumping knowledge) and
    that does not normalize by degrees."""
    return (
        isinstance(model, BasicGNN)
        and model.jk_mode is None
        and (model.norms is None or all(isinstance(n, torch.nn.Identity) for n in model.norms))
        and not normalizes_by_degree(model)
    )


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
        model: a PyG ``BasicGNN`` (see :func:`supports_layerwise`), in eval mode.
        graph: the CSC graph.
        x: ``[num_nodes, in_channels]`` input features (a CPU tensor; memory maps work).
        chunk_size: destination nodes per step.
        device: where each chunk's layer runs.
    """
    if not supports_layerwise(model):
        raise ValueError(
            "layer-wise inference needs a PyG BasicGNN without norms or jumping knowledge "
            f"(got {type(model).__name__})"
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
            out = conv(h, batch.edge_index.to(device))[: batch.batch_size]
            if layer < model.num_layers - 1 or model.jk_mode is not None:
                out = model.act(out) if model.act is not None else out
            outputs.append(out.cpu())
        hidden = torch.cat(outputs)
    return hidden
