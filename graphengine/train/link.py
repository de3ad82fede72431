"""The link-prediction loop: a GNN encoder and an edge decoder trained on
:class:`~graphengine.loader.LinkNeighborLoader` batches with negatives, scored by ROC AUC,
MRR and Hits@K on held-out edges."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch_geometric.data import Data
from torch_geometric.utils import is_undirected
from tqdm import tqdm

from graphengine.data.graph_store import Graph
from graphengine.data.output_files import append_line
from graphengine.datasets.dataset import GraphDataset
from graphengine.loader.link_neighbor_loader import LinkNeighborLoader
from graphengine.nn.blocks import supports_layerwise
from graphengine.nn.inference import layerwise_inference
from graphengine.train.evaluate import FULL_EVAL_MAX_EDGES
from graphengine.train.link_metrics import ranking_metrics, roc_auc
from graphengine.train.link_split import random_link_split
from graphengine.train.metrics import check_finite_loss, json_line
from graphengine.train.schedule import check_schedule, evaluation_due
from samplers.link import EdgeSet, NegativeSampling, draw_negative_destinations
from samplers.seeds import mix_seed

log = logging.getLogger(__name__)

LINK_SPLITS = ("val", "test")
LINK_EVAL_MODES = ("auto", "full", "layerwise")
# Positive edges scored against their negatives at once in evaluation.
RANKING_CHUNK = 4096


class LinkTrainer:
    """Trains ``encoder`` and ``decoder`` to tell ``dataset``'s edges from other node pairs.

    The edges are split as PyG's ``RandomLinkSplit`` does (seeded; see
    :func:`~graphengine.train.link_split.random_link_split`), both directions of an edge
    together when the graph is undirected: training edges pass messages and are the
    positives of the training batches, whose negatives are drawn per batch by the
    :class:`LinkNeighborLoader` (``neg_sampling_ratio`` uniform node pairs per positive);
    validation edges are scored over the training edges' graph, test edges over the
    training and validation edges' graph, each against the split's own negatives.

    Metrics of a split: ``auc`` (ROC AUC over its positives and negatives), and ``mrr`` and
    ``hits@K`` of each positive edge ``(s, d)`` ranked among ``eval_negatives`` edges
    ``(s, d')``, ``d'`` uniform over the nodes that ``s`` has no edge to (as OGB's
    ``ogbl-citation2`` evaluator ranks, ties counting one half).

    Args:
        encoder: a module called as ``encoder(x, edge_index)`` returning
            ``[num_nodes, channels]`` embeddings (e.g. a PyG ``BasicGNN``), run on a whole
            batch in training.
        decoder: a module called as ``decoder(z_src, z_dst)`` returning ``[num_pairs]``
            logits (see :mod:`graphengine.nn.decoders`).
        dataset: a :class:`GraphDataset` or a PyG ``Data`` with ``x`` and ``edge_index``.
        fanouts: neighbors per hop around both ends of every labelled edge.
        batch_size: positive edges per training step.
        lr, weight_decay: Adam's settings.
        seed: seeds the split, the batches and the evaluation's negatives.
        num_val, num_test: the validation and test edges (shares or counts).
        neg_sampling_ratio: negatives per positive, in training and in the splits.
        eval_negatives: negatives per positive edge for MRR and Hits@K.
        hits_at: the K of each reported ``hits@K``.
        eval_mode: how the embeddings of every node are computed for evaluation: ``'full'``
            (the encoder on the whole graph), ``'layerwise'`` (layer by layer in chunks, for
            PyG ``BasicGNN`` encoders) or ``'auto'`` (full up to 5M edges, layer-wise above
            when the encoder allows it, else full).
        num_workers: sampling threads of the loader (0: load in the training thread).
        device: where the model runs.
        metrics_path: a file to append one JSON line of metrics per epoch to.
        progress: show tqdm progress bars.
    """

    def __init__(
        self,
        encoder: torch.nn.Module,
        decoder: torch.nn.Module,
        dataset: GraphDataset | Data,
        fanouts: Sequence[int] = (10, 10),
        batch_size: int = 512,
        lr: float = 0.01,
        weight_decay: float = 0.0,
        seed: int = 0,
        num_val: float | int = 0.1,
        num_test: float | int = 0.1,
        neg_sampling_ratio: float = 1.0,
        eval_negatives: int = 100,
        hits_at: Sequence[int] = (1, 3, 10),
        eval_mode: str = "auto",
        num_workers: int = 1,
        device: str | torch.device = "cpu",
        metrics_path: str | Path | None = None,
        progress: bool = True,
    ):
        if eval_mode not in LINK_EVAL_MODES:
            raise ValueError(f"'eval_mode' must be one of {LINK_EVAL_MODES} (got {eval_mode!r})")
        if isinstance(eval_negatives, bool) or not isinstance(eval_negatives, int):
            raise TypeError(f"'eval_negatives' must be an int (got {eval_negatives!r})")
        if eval_negatives < 1:
            raise ValueError(f"'eval_negatives' must be >= 1 (got {eval_negatives})")
        if not neg_sampling_ratio > 0:
            raise ValueError(f"'neg_sampling_ratio' must be > 0 (got {neg_sampling_ratio})")
        data = _as_data(dataset)
        self.device = torch.device(device)
        self.encoder = encoder.to(self.device)
        self.decoder = decoder.to(self.device)
        self.seed = seed
        self.eval_negatives = eval_negatives
        self.hits_at = tuple(hits_at)
        self.progress = progress
        self.metrics_path = Path(metrics_path) if metrics_path is not None else None
        self.undirected = bool(is_undirected(data.edge_index, num_nodes=data.num_nodes))
        self.split = random_link_split(
            data,
            num_val=num_val,
            num_test=num_test,
            is_undirected=self.undirected,
            neg_sampling_ratio=neg_sampling_ratio,
            add_negative_train_samples=False,
            seed=seed,
        )
        for split in LINK_SPLITS:
            labels = getattr(self.split, split).edge_label
            if not bool((labels == 1).any()) or not bool((labels == 0).any()):
                raise ValueError(
                    f"the {split} split has {int((labels == 1).sum())} positive and "
                    f"{int((labels == 0).sum())} negative edges: it needs both to be scored "
                    "(raise 'num_val' / 'num_test' or 'neg_sampling_ratio')"
                )
        self.eval_mode = _eval_mode(eval_mode, encoder, data.edge_index.size(1))
        # What no ranking negative may be: an edge, or the source itself.
        loops = np.arange(int(data.num_nodes), dtype=np.int64)
        row, col = data.edge_index.numpy()
        self._not_negative = EdgeSet(
            np.concatenate([row, loops]), np.concatenate([col, loops]), int(data.num_nodes)
        )
        train = self.split.train
        self.train_loader = LinkNeighborLoader(
            train,
            list(fanouts),
            edge_label_index=train.edge_label_index,
            edge_label=train.edge_label,
            neg_sampling=NegativeSampling("binary", neg_sampling_ratio),
            batch_size=batch_size,
            shuffle=True,
            seed=seed,
            num_workers=num_workers,
            device=self.device,
        )
        parameters = list(self.encoder.parameters()) + list(self.decoder.parameters())
        self.optimizer = torch.optim.Adam(parameters, lr=lr, weight_decay=weight_decay)
        self.epoch = 0

    def fit(
        self,
        epochs: int,
        eval_every: int = 1,
        on_epoch: Callable[[dict], None] | None = None,
    ) -> list[dict]:
        """Train until ``epochs`` epochs are done in total; returns one metrics dict per
        epoch: ``epoch``, ``loss``, ``epoch_s``, ``edges_per_s`` (positive edges), and every
        ``eval_every`` epochs and at the last the validation metrics as ``val_auc``,
        ``val_mrr``, ``val_hits@K``. ``on_epoch(metrics)`` is called as each epoch ends."""
        check_schedule(epochs, eval_every)
        history = []
        while self.epoch < epochs:
            metrics = self.train_epoch()
            if evaluation_due(self.epoch, epochs, eval_every):
                metrics.update(_prefixed("val", self.evaluate("val")))
            history.append(metrics)
            log.info("%s", _summary(metrics))
            if self.metrics_path is not None:
                append_line(self.metrics_path, json_line(metrics))
            if on_epoch is not None:
                on_epoch(metrics)
        return history

    def train_epoch(self) -> dict:
        """One pass over the training edges; returns this epoch's metrics."""
        self.encoder.train()
        self.decoder.train()
        self.train_loader.set_epoch(self.epoch)
        total_loss = seen = 0
        start = time.perf_counter()
        batches = tqdm(
            self.train_loader,
            desc=f"epoch {self.epoch + 1}",
            disable=not self.progress,
            leave=False,
        )
        for step, batch in enumerate(batches, start=1):
            loss = self.step(batch)
            check_finite_loss(loss, self.epoch + 1, step)
            total_loss += loss * batch.input_id.numel()
            seen += batch.input_id.numel()
        elapsed = time.perf_counter() - start
        self.epoch += 1
        return {
            "epoch": self.epoch,
            "loss": total_loss / max(seen, 1),
            "epoch_s": elapsed,
            "edges_per_s": seen / elapsed if elapsed > 0 else 0.0,
            "stage_s": self.train_loader.stage_times,
        }

    def step(self, batch: Data) -> float:
        """One optimizer step on a :class:`LinkNeighborLoader` batch (``edge_label_index``,
        ``edge_label``); returns the mean binary cross-entropy of its labelled edges."""
        self.optimizer.zero_grad()
        z = self.encoder(batch.x, batch.edge_index)
        src, dst = batch.edge_label_index
        logits = self.decoder(z[src], z[dst])
        loss = F.binary_cross_entropy_with_logits(logits, batch.edge_label.float())
        loss.backward()
        self.optimizer.step()
        return float(loss.detach())

    @torch.no_grad()
    def evaluate(self, split: str) -> dict[str, float]:
        """``auc``, ``mrr`` and ``hits@K`` on ``split`` (``'val'`` or ``'test'``)."""
        if split not in LINK_SPLITS:
            raise ValueError(f"'split' must be one of {LINK_SPLITS} (got {split!r})")
        self.encoder.eval()
        self.decoder.eval()
        data = getattr(self.split, split)
        z = self._embeddings(data)
        src, dst = data.edge_label_index
        scores = torch.cat(
            [
                self.decoder(z[s].to(self.device), z[d].to(self.device)).cpu()
                for s, d in zip(src.split(RANKING_CHUNK), dst.split(RANKING_CHUNK), strict=True)
            ]
        )
        result = {"auc": roc_auc(scores, data.edge_label)}
        positive = data.edge_label == 1
        result.update(self._ranking(z, src[positive], scores[positive], split))
        return result

    def evaluate_all(self) -> dict[str, float]:
        """Every split's metrics, as ``val_auc``, ``test_mrr``, ``test_hits@10`` ..."""
        result = {}
        for split in LINK_SPLITS:
            result.update(_prefixed(split, self.evaluate(split)))
        return result

    def _embeddings(self, data: Data) -> torch.Tensor:
        """Every node's embedding over ``data``'s message-passing edges: float
        ``[num_nodes, channels]`` on the CPU."""
        x = torch.as_tensor(data.x).float()
        if self.eval_mode == "layerwise":
            graph = Graph.from_edge_index(data.edge_index, num_nodes=int(data.num_nodes))
            return layerwise_inference(
                self.encoder, graph, x, device=self.device, progress=self.progress
            )
        return self.encoder(x.to(self.device), data.edge_index.to(self.device)).cpu()

    def _ranking(self, z, sources, positive_scores, split: str) -> dict[str, float]:
        """MRR and Hits@K of each positive among ``eval_negatives`` destinations drawn for its
        source ``sources`` (int64 ``[num_pos]``)."""
        negatives = draw_negative_destinations(
            np.repeat(sources.numpy(), self.eval_negatives),
            self._not_negative.num_nodes,
            seed=mix_seed(self.seed, LINK_SPLITS.index(split)),
            edges=self._not_negative,
        )
        negatives = torch.from_numpy(negatives).view(-1, self.eval_negatives)
        scores = []
        for s, d in zip(sources.split(RANKING_CHUNK), negatives.split(RANKING_CHUNK), strict=True):
            z_src = z[s].to(self.device).unsqueeze(1).expand(-1, d.size(1), -1)
            scores.append(self.decoder(z_src.reshape(-1, z.size(1)), z[d.view(-1)].to(self.device)))
        negative_scores = torch.cat(scores).cpu().view(-1, self.eval_negatives)
        return ranking_metrics(positive_scores, negative_scores, self.hits_at)


def _as_data(dataset: GraphDataset | Data) -> Data:
    """``dataset``'s nodes' features and edges as a PyG ``Data`` (``x``, ``edge_index``)."""
    if isinstance(dataset, GraphDataset):
        return Data(
            x=torch.from_numpy(np.array(dataset.x, dtype=np.float32)),
            edge_index=dataset.graph.to_edge_index(),
            num_nodes=dataset.num_nodes,
        )
    if not isinstance(dataset, Data) or getattr(dataset, "x", None) is None:
        raise TypeError(
            "'dataset' must be a GraphDataset or a torch_geometric Data with 'x' and "
            f"'edge_index' (got {type(dataset).__name__})"
        )
    return Data(x=dataset.x, edge_index=dataset.edge_index, num_nodes=dataset.num_nodes)


def _eval_mode(mode: str, encoder: torch.nn.Module, num_edges: int) -> str:
    """``mode`` checked against ``encoder``; ``'auto'`` becomes full up to 5M edges."""
    if mode == "layerwise" and not supports_layerwise(encoder):
        raise ValueError(
            "'eval_mode' 'layerwise' needs a PyG BasicGNN encoder without norms, jumping "
            f"knowledge or degree-normalizing GCN layers (got {type(encoder).__name__})"
        )
    if mode != "auto":
        return mode
    if num_edges <= FULL_EVAL_MAX_EDGES or not supports_layerwise(encoder):
        return "full"
    return "layerwise"


def _prefixed(split: str, metrics: dict[str, float]) -> dict[str, float]:
    return {f"{split}_{key}": value for key, value in metrics.items()}


def _summary(metrics: dict) -> str:
    """One readable line for an epoch's ``metrics``."""
    parts = [f"epoch {metrics['epoch']}: loss {metrics['loss']:.4f}"]
    for key in ("val_auc", "val_mrr"):
        if key in metrics:
            parts.append(f"{key} {metrics[key]:.4f}")
    parts.append(f"{metrics['epoch_s']:.2f}s, {metrics['edges_per_s']:,.0f} edges/s")
    return ", ".join(parts)
