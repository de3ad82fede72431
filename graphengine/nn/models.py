"""The PyG models the CLI trains, by name."""

from __future__ import annotations

import torch
from torch_geometric.nn import GAT, GCN, GIN, GraphSAGE

MODELS = {"sage": GraphSAGE, "gcn": GCN, "gin": GIN, "gat": GAT}


def build_model(
    name: str,
    in_channels: int,
    hidden_channels: int,
    out_channels: int,
    num_layers: int,
    dropout: float = 0.5,
) -> torch.nn.Module:
    """A PyG ``BasicGNN`` (``sage``, ``gcn``, ``gin`` or ``gat``) with ``num_layers`` layers."""
    if name not in MODELS:
        raise ValueError(f"'model' must be one of {sorted(MODELS)} (got {name!r})")
    return MODELS[name](
        in_channels=in_channels,
        hidden_channels=hidden_channels,
        out_channels=out_channels,
        num_layers=num_layers,
        dropout=dropout,
    )
