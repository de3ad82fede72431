"""DGL 2.1's GraphSAGE, GAT and GCN training loops for ``graphengine bench train --vs dgl``,
as its users write them.

``dgl.dataloading.DataLoader`` over the training nodes, shuffled, in the calling process
(``num_workers=0``, DGL's default), with ``dgl.dataloading.NeighborSampler`` prefetching ``x``
and ``y``; a model of DGL's layers on the sampled blocks with the sizes of PyG's model in
:mod:`graphengine.bench.train` (ReLU, then dropout, between layers): ``SAGEConv(..., 'mean')``;
``GATConv`` with :data:`GAT_HEADS` heads of ``hidden / heads`` channels concatenated (in the
last layer averaged), like PyG's ``GAT(..., heads=4)``; ``GraphConv(norm='both')``. For GAT and
GCN the graph gets a self loop on every node first, as DGL's GAT and GCN examples do (PyG's
layers add them inside). Adam (lr 0.003) and cross-entropy. Fanouts come first hop (the seeds'
neighbors) first, as everywhere in graphengine, and go to DGL reversed (its list is by layer,
input layer first). Test accuracy is exact full-neighbor inference, layer by layer over all
nodes, as DGL's GraphSAGE example does it. DGL (benchmark only) is imported inside these functions
(:func:`graphengine.bench.peers.dgl_module`), never with graphengine; where it cannot run,
:class:`graphengine.bench.peers.Unavailable` says why.
"""

from __future__ import annotations

import time
from itertools import pairwise

import torch
import torch.nn.functional as F

from graphengine.bench.peers import Unavailable, dgl_fanouts, dgl_graph, dgl_module
from graphengine.datasets.dataset import GraphDataset

GAT_HEADS = 4
MODELS = ("sage", "gat", "gcn")


class DGLModel(torch.nn.Module):
    """``num_layers`` DGL layers of ``kind`` (one of :data:`MODELS`) ``in_channels -> hidden
    -> ... -> out_channels`` on blocks, ReLU then dropout between layers (the layout of PyG's
    ``BasicGNN``, whose dropout defaults to 0)."""

    def __init__(
        self,
        dgl,
        kind: str,
        in_channels: int,
        hidden: int,
        num_layers: int,
        out_channels: int,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.widths = [in_channels] + [hidden] * (num_layers - 1) + [out_channels]
        self.layers = torch.nn.ModuleList(
            _layer(dgl, kind, a, b, last=i == num_layers - 1)
            for i, (a, b) in enumerate(pairwise(self.widths))
        )
        self.dropout = torch.nn.Dropout(dropout)

    def layer(self, i: int, block, x: torch.Tensor) -> torch.Tensor:
        """Layer ``i`` on ``block``: ``x`` ``[block.num_src_nodes(), widths[i]]`` float32 to
        ``[block.num_dst_nodes(), widths[i + 1]]`` float32 (ReLU and dropout after all but
        the last)."""
        x = self.layers[i](block, x)
        if x.dim() == 3:  # GAT's heads: concatenated, or averaged in the last layer
            x = x.flatten(1) if i < len(self.layers) - 1 else x.mean(1)
        if i < len(self.layers) - 1:
            x = self.dropout(F.relu(x))
        return x

    def forward(self, blocks: list, x: torch.Tensor) -> torch.Tensor:
        """``x`` ``[blocks[0].num_src_nodes(), in_channels]`` float32 to the logits of the
        seeds, ``[blocks[-1].num_dst_nodes(), out_channels]`` float32."""
        for i, block in enumerate(blocks):
            x = self.layer(i, block, x)
        return x


def _layer(dgl, kind: str, in_channels: int, out_channels: int, last: bool):
    if kind == "sage":
        return dgl.nn.SAGEConv(in_channels, out_channels, "mean")
    if kind == "gcn":
        return dgl.nn.GraphConv(in_channels, out_channels, norm="both", allow_zero_in_degree=True)
    if last:  # PyG's GAT averages its heads in the last layer
        return dgl.nn.GATConv(in_channels, out_channels, GAT_HEADS, allow_zero_in_degree=True)
    return dgl.nn.GATConv(
        in_channels, out_channels // GAT_HEADS, GAT_HEADS, allow_zero_in_degree=True
    )


def _dgl(device: torch.device):
    if device.type != "cpu":
        raise Unavailable(f"DGL's loop runs on the CPU only here (got device '{device}')")
    return dgl_module()


def _setup(dgl, kind: str, dataset: GraphDataset, fanouts: list[int], hidden: int, seed: int):
    """The DGL graph (``ndata`` ``x`` and ``y``; self loops for GAT and GCN), its neighbor
    sampler and a seeded model of ``kind`` with its Adam optimizer."""
    if kind not in MODELS:
        raise ValueError(f"'model' must be one of {MODELS} (got {kind!r})")
    dgl.seed(seed)
    g = dgl_graph(dgl, dataset.graph, {"x": dataset.x, "y": dataset.y})
    if kind != "sage":
        g = dgl.add_self_loop(dgl.remove_self_loop(g))
    sampler = dgl.dataloading.NeighborSampler(
        dgl_fanouts(fanouts), prefetch_node_feats=["x"], prefetch_labels=["y"]
    )
    torch.manual_seed(seed)
    model = DGLModel(dgl, kind, dataset.num_features, hidden, len(fanouts), dataset.num_classes)
    return g, sampler, model, torch.optim.Adam(model.parameters(), lr=0.003)


def _train_loader(dgl, g, sampler, dataset: GraphDataset, batch_size: int):
    train = torch.as_tensor(dataset.train_idx, dtype=torch.int64)
    return dgl.dataloading.DataLoader(g, train, sampler, batch_size=batch_size, shuffle=True)


def _step(model: DGLModel, optimizer, blocks: list) -> None:
    """A DGL user's training step on one batch's ``blocks``."""
    optimizer.zero_grad()
    out = model(blocks, blocks[0].srcdata["x"])
    F.cross_entropy(out, blocks[-1].dstdata["y"]).backward()
    optimizer.step()


def steps(
    kind: str,
    dataset: GraphDataset,
    fanouts: list[int],
    batch_size: int,
    hidden: int,
    batches: int,
    seed: int,
    device: torch.device,
) -> dict:
    """Seconds a step (``step_s``) over ``batches`` training steps, after one warm-up step,
    timed from the DataLoader's iterator as :func:`graphengine.bench.train` times PyG's."""
    dgl = _dgl(device)
    g, sampler, model, optimizer = _setup(dgl, kind, dataset, fanouts, hidden, seed)
    model.train()
    iterator = iter(_train_loader(dgl, g, sampler, dataset, batch_size))
    _step(model, optimizer, next(iterator)[2])
    start = time.perf_counter()
    for _, (_, _, blocks) in zip(range(batches), iterator, strict=False):
        _step(model, optimizer, blocks)
    return {"step_s": (time.perf_counter() - start) / batches}


def accuracy(
    kind: str,
    dataset: GraphDataset,
    fanouts: list[int],
    batch_size: int,
    hidden: int,
    epochs: int,
    seed: int,
    device: torch.device,
) -> float:
    """Test accuracy after ``epochs`` full epochs of DGL's loop, by exact full-neighbor
    inference."""
    dgl = _dgl(device)
    g, sampler, model, optimizer = _setup(dgl, kind, dataset, fanouts, hidden, seed)
    loader = _train_loader(dgl, g, sampler, dataset, batch_size)
    model.train()
    for _ in range(epochs):
        for _, _, blocks in loader:
            _step(model, optimizer, blocks)
    test = torch.as_tensor(dataset.test_idx, dtype=torch.int64)
    predicted = _inference(dgl, model, g, batch_size, test).argmax(dim=1)
    return float((predicted == g.ndata["y"][test]).float().mean())


@torch.no_grad()
def _inference(dgl, model: DGLModel, g, batch_size: int, nodes: torch.Tensor) -> torch.Tensor:
    """Logits ``[len(nodes), out_channels]`` float32 of ``nodes`` (int64), layer by layer:
    every layer but the last over all nodes, each with all its neighbors."""
    model.eval()
    sampler = dgl.dataloading.MultiLayerFullNeighborSampler(1)
    x = g.ndata["x"]
    last = len(model.layers) - 1
    for i in range(last + 1):
        targets = nodes if i == last else torch.arange(g.num_nodes())
        out = torch.empty(g.num_nodes(), model.widths[i + 1])
        loader = dgl.dataloading.DataLoader(g, targets, sampler, batch_size=batch_size)
        for input_nodes, output_nodes, blocks in loader:
            out[output_nodes] = model.layer(i, blocks[0], x[input_nodes])
        x = out
    return x[nodes]
