"""Edge decoders for link prediction: a score (a logit) for each node pair from its ends'
embeddings, as PyG's link-prediction examples build them."""

from __future__ import annotations

import torch

DECODERS = ("dot", "mlp")


class DotProductDecoder(torch.nn.Module):
    """``<z_src, z_dst>``, the GAE decoder (Kipf & Welling, 2016), without weights."""

    def forward(self, z_src: torch.Tensor, z_dst: torch.Tensor) -> torch.Tensor:
        """Float ``[num_pairs]`` logits of float ``[num_pairs, channels]`` end embeddings."""
        return (z_src * z_dst).sum(dim=-1)


class MLPDecoder(torch.nn.Module):
    """A two-layer perceptron on the ends' element-wise product (symmetric in the ends).

    Args:
        channels: the embeddings' width.
        hidden_channels: the hidden layer's width (``channels`` by default).
        dropout: dropout before each layer while training.
    """

    def __init__(self, channels: int, hidden_channels: int | None = None, dropout: float = 0.0):
        super().__init__()
        hidden_channels = hidden_channels or channels
        self.lin1 = torch.nn.Linear(channels, hidden_channels)
        self.lin2 = torch.nn.Linear(hidden_channels, 1)
        self.dropout = torch.nn.Dropout(dropout)

    def forward(self, z_src: torch.Tensor, z_dst: torch.Tensor) -> torch.Tensor:
        """Float ``[num_pairs]`` logits of float ``[num_pairs, channels]`` end embeddings."""
        h = self.lin1(self.dropout(z_src * z_dst)).relu()
        return self.lin2(self.dropout(h)).view(-1)


def build_decoder(name: str, channels: int, dropout: float = 0.0) -> torch.nn.Module:
    """The decoder ``name`` (one of :data:`DECODERS`) for ``channels``-wide embeddings."""
    if name == "dot":
        return DotProductDecoder()
    if name == "mlp":
        return MLPDecoder(channels, dropout=dropout)
    raise ValueError(f"'decoder' must be one of {DECODERS} (got {name!r})")
