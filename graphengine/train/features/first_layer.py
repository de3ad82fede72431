"""What the model's first layer does with ``x``: whether the training batches may carry it as
bfloat16, or not at all."""

from __future__ import annotations

import torch
from torch_geometric.nn import GATConv
from torch_geometric.nn.models.basic_gnn import BasicGNN

from graphengine.nn.forward import SeedLogits
from graphengine.nn.fused_sage import fuses


def first_layer(model: torch.nn.Module) -> torch.nn.Module | None:
    """The first layer of a PyG ``BasicGNN`` model, else ``None``."""
    convs = getattr(model, "convs", None)
    return convs[0] if isinstance(model, BasicGNN) and convs else None


def fuses_sage_on_blocks(seed_logits: SeedLogits) -> bool:
    """Whether the first layer runs as GraphSAGE's fused mean layer (on blocks)."""
    return fuses(first_layer(seed_logits.model)) and seed_logits.mode == "blocks"


def casts_x_to_bf16(seed_logits: SeedLogits) -> bool:
    """Whether the model's first layer casts ``x`` to bfloat16 under autocast before
    anything reads it: GAT's shared projection, or GraphSAGE's fused mean layer on blocks.
    Then bfloat16 features change nothing but the bytes gathered."""
    first = first_layer(seed_logits.model)
    if type(first) is GATConv:
        return first.lin is not None
    return fuses_sage_on_blocks(seed_logits)
