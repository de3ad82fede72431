"""Node classification on subgraph batches (Cluster-GCN, GraphSAINT) instead of sampled
neighborhoods: the model runs on a whole subgraph and learns from its training nodes."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch_geometric.data import Data

from graphengine.loader.cluster import ClusterData, ClusterLoader
from graphengine.loader.saint import GraphSAINTRandomWalkSampler

SAMPLERS = ("neighbor", "labor", "cluster", "saint")
SUBGRAPH_SAMPLERS = ("cluster", "saint")


@dataclass(frozen=True)
class SubgraphSampling:
    """How training subgraphs are drawn.

    Attributes:
        kind: ``'cluster'`` (Cluster-GCN: ``clusters_per_batch`` of ``num_parts`` METIS
            clusters a batch, with the edges between them) or ``'saint'`` (GraphSAINT random
            walks: ``roots`` walks of ``walk_length`` steps a batch, the subgraph their nodes
            induce, ``num_steps`` batches an epoch).
        num_parts: clusters; by default one per ``nodes_per_part`` nodes.
        nodes_per_part: nodes per cluster when ``num_parts`` is not given.
        clusters_per_batch: clusters a batch.
        cluster_dir: a directory where the clusters are cached (never a read-only dataset's).
        roots, walk_length: walks a batch and steps a walk.
        num_steps: batches an epoch; by default ``ceil(num_nodes / roots)``, as many roots
            in all as the graph has nodes.
        sample_coverage: samples per node for GraphSAINT's ``node_norm``, which weighs each
            training node's loss (0: unweighted).
    """

    kind: str
    num_parts: int | None = None
    nodes_per_part: int = 1000
    clusters_per_batch: int = 20
    cluster_dir: str | Path | None = None
    roots: int = 2000
    walk_length: int = 2
    num_steps: int | None = None
    sample_coverage: int = 20

    def __post_init__(self):
        if self.kind not in SUBGRAPH_SAMPLERS:
            raise ValueError(
                f"subgraph sampling 'kind' must be one of {SUBGRAPH_SAMPLERS} (got {self.kind!r})"
            )

    def loader(self, data: Data, seed: int, num_workers: int, device=None):
        """The training loader over ``data`` (a PyG ``Data`` with ``x``, ``y``,
        ``edge_index`` and ``train_mask``): a :class:`ClusterLoader` or a
        :class:`GraphSAINTRandomWalkSampler`, its batches moved to ``device``."""
        num_nodes = int(data.num_nodes)
        if self.kind == "cluster":
            num_parts = self.num_parts or max(1, num_nodes // self.nodes_per_part)
            clusters = ClusterData(data, min(num_parts, num_nodes), save_dir=self.cluster_dir)
            return ClusterLoader(
                clusters,
                batch_size=self.clusters_per_batch,
                shuffle=True,
                seed=seed,
                num_workers=num_workers,
                device=device,
            )
        return GraphSAINTRandomWalkSampler(
            data,
            batch_size=self.roots,
            walk_length=self.walk_length,
            num_steps=self.num_steps or math.ceil(num_nodes / self.roots),
            sample_coverage=self.sample_coverage,
            log=False,
            seed=seed,
            num_workers=num_workers,
            device=device,
        )


class SubgraphLogits(torch.nn.Module):
    """``model``'s logits for a subgraph batch's training nodes:
    ``[batch.train_mask.sum(), num_classes]``, the model run on the whole subgraph. A
    module, so that a strategy can wrap it."""

    mode = "whole"

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, batch: Data) -> torch.Tensor:
        return self.model(batch.x, batch.edge_index)[batch.train_mask]


def subgraph_loss(logits: torch.Tensor, batch: Data) -> tuple[torch.Tensor, torch.Tensor]:
    """The loss of a subgraph batch's training nodes and their labels (int64 ``[n]``): the
    mean cross-entropy, weighted by ``node_norm`` when the batch has it (GraphSAINT's
    normalized loss, as a weighted mean)."""
    mask = batch.train_mask
    target = batch.y[mask].long()
    if len(target) == 0:
        return logits.sum() * 0.0, target
    if "node_norm" not in batch:
        return F.cross_entropy(logits, target), target
    weight = batch.node_norm[mask].to(logits.dtype)
    loss = F.cross_entropy(logits, target, reduction="none")
    return (loss * weight).sum() / weight.sum(), target
