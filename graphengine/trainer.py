"""Node classification with any PyG model on sampled mini-batches."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch_geometric.nn.models.basic_gnn import BasicGNN
from tqdm import tqdm

from graphengine.blocks import block_forward, normalizes_by_degree, supports_blocks, to_blocks
from graphengine.datasets.dataset import SPLITS, GraphDataset
from graphengine.distributed import rank_and_world
from graphengine.feature_store import as_tensor
from graphengine.inference import layerwise_inference
from graphengine.loader import NeighborLoader

log = logging.getLogger(__name__)

# Full-graph evaluation needs the whole graph's activations in memory at once.
_FULL_EVAL_MAX_EDGES = 5_000_000
_EVAL_MODES = ("auto", "full", "layerwise", "sampled")


class Trainer:
    """Trains ``model`` on ``dataset``'s training nodes with a :class:`NeighborLoader`.

    Args:
        model: any module called as ``model(x, edge_index)`` returning
            ``[num_nodes, num_classes]`` logits. PyG ``BasicGNN`` models with one layer
            per hop run layer by layer on the batch's blocks, each layer computing only
            the nodes the next one reads (:mod:`graphengine.blocks`); with norms or
            jumping knowledge, they get the per-hop counts to trim finished layers
            instead (``trim_to_layer``). Neither applies to a degree-normalizing
            ``GCNConv``, whose normalization counts the edges they drop.
        dataset: the graph, features, labels and splits.
        fanouts: neighbors per hop for training (and for sampled evaluation).
        batch_size: seeds per training batch.
        lr, weight_decay: Adam's settings.
        seed: seeds the model's initialization RNG use and every epoch's batches.
        eval_mode: ``'full'`` (the model on the whole graph at once), ``'layerwise'``
            (each layer over all nodes in chunks, for PyG ``BasicGNN`` models),
            ``'sampled'`` (mini-batches with ``fanouts``) or ``'auto'`` (full below 5M
            edges, else layer-wise when the model allows, else sampled).
        num_workers: sampling threads of the loaders (0: load in the training thread).
        forward: how the model runs on a batch (see :class:`SeedLogits`); ``'auto'``
            picks blocks, else trimming, else the whole batch, as the model allows.
        device: where the model runs; batches are copied there by the loader.
        checkpoint: a file to save after every epoch and to resume from if it exists.
        metrics_path: a file to append one JSON line of metrics per epoch to.
        progress: show a tqdm progress bar.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        dataset: GraphDataset,
        fanouts: Sequence[int] = (15, 10, 5),
        batch_size: int = 1024,
        lr: float = 0.003,
        weight_decay: float = 0.0,
        seed: int = 0,
        eval_mode: str = "auto",
        num_workers: int = 1,
        forward: str = "auto",
        device: str | torch.device = "cpu",
        checkpoint: str | Path | None = None,
        metrics_path: str | Path | None = None,
        progress: bool = True,
    ):
        if eval_mode not in _EVAL_MODES:
            raise ValueError(f"'eval_mode' must be one of {_EVAL_MODES} (got {eval_mode!r})")
        if eval_mode == "layerwise" and not supports_blocks(model):
            raise ValueError(
                "'eval_mode' 'layerwise' needs a PyG BasicGNN without norms, jumping knowledge "
                f"or degree-normalizing GCN layers (got {type(model).__name__})"
            )
        if eval_mode == "auto":
            if dataset.graph.num_edges <= _FULL_EVAL_MAX_EDGES:
                eval_mode = "full"
            else:
                eval_mode = "layerwise" if supports_blocks(model) else "sampled"
        self.device = torch.device(device)
        self.model = model.to(self.device)
        self.rank, self.world_size = rank_and_world()
        self._seed_logits = SeedLogits(self.model, len(fanouts), forward)
        self._train_model = self._seed_logits
        if self.world_size > 1:
            device_ids = [self.device.index] if self.device.type == "cuda" else None
            self._train_model = DistributedDataParallel(self._seed_logits, device_ids=device_ids)
        self.dataset = dataset
        self.fanouts = list(fanouts)
        self.batch_size = batch_size
        self.eval_mode = eval_mode
        self.seed = seed
        self.num_workers = num_workers
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
        self.checkpoint = Path(checkpoint) if checkpoint is not None else None
        self.metrics_path = Path(metrics_path) if metrics_path is not None else None
        self.progress = progress
        self.epoch = 0
        self.train_loader = NeighborLoader(
            dataset,
            self.fanouts,
            batch_size=batch_size,
            input_nodes=dataset.train_idx,
            shuffle=True,
            seed=seed,
            num_workers=num_workers,
            device=self.device,
            pin_memory=self.device.type == "cuda",
            rank=self.rank,
            world_size=self.world_size,
        )
        self._y = as_tensor(dataset.y)
        if self.checkpoint is not None and self.checkpoint.is_file():
            self.load_checkpoint(self.checkpoint)

    def fit(self, epochs: int, eval_every: int = 1) -> list[dict]:
        """Train until ``epochs`` epochs are done in total (resumed ones count).

        Returns one metrics dict per epoch run: ``epoch``, ``loss``, ``train_acc``
        (on the training batches of all workers), ``val_acc`` (every ``eval_every``
        epochs and at the last; never with ``eval_every=0``), ``epoch_s``, ``seeds_per_s``
        (all workers), ``seeds_per_s_per_worker``, ``workers`` and ``stage_s``, this
        worker's seconds per stage: ``sample``, ``gather``, ``copy`` (in the loader's
        threads), ``compute`` and ``waiting`` (the training thread waiting for a batch).
        """
        history = []
        while self.epoch < epochs:
            metrics = self.train_epoch()
            due = eval_every > 0 and (self.epoch % eval_every == 0 or self.epoch == epochs)
            if self.rank == 0 and due:
                metrics["val_acc"] = self.evaluate("val")
            history.append(metrics)
            self._record(metrics)
        return history

    def train_epoch(self) -> dict:
        """One pass over the training nodes; returns this epoch's metrics."""
        self._train_model.train()
        self.train_loader.set_epoch(self.epoch)
        total_loss = correct = seen = 0
        start = time.perf_counter()
        batches = tqdm(
            self.train_loader,
            desc=f"epoch {self.epoch + 1}",
            disable=not self.progress,
            leave=False,
        )
        compute = 0.0
        for batch in batches:
            step_start = time.perf_counter()
            loss, right = self.step(batch)
            total_loss += loss * batch.batch_size
            correct += right
            seen += batch.batch_size
            compute += time.perf_counter() - step_start
        elapsed = time.perf_counter() - start
        self.epoch += 1
        local_seen = seen
        if self.world_size > 1:
            totals = torch.tensor([total_loss, correct, seen], dtype=torch.float64)
            dist.all_reduce(totals)
            total_loss, correct, seen = totals.tolist()
        stages = self.train_loader.stage_times
        stages["compute"] = compute
        log.info(
            "epoch %d stages: %s", self.epoch, ", ".join(f"{k} {v:.2f}s" for k, v in stages.items())
        )
        return {
            "epoch": self.epoch,
            "loss": total_loss / max(seen, 1),
            "train_acc": correct / max(seen, 1),
            "epoch_s": elapsed,
            "seeds_per_s": seen / elapsed if elapsed > 0 else 0.0,
            "seeds_per_s_per_worker": local_seen / elapsed if elapsed > 0 else 0.0,
            "workers": self.world_size,
            "stage_s": stages,
        }

    @property
    def forward_mode(self) -> str:
        """How the model runs on a batch: ``'blocks'``, ``'trim'`` or ``'whole'``."""
        return self._seed_logits.mode

    def step(self, batch) -> tuple[float, int]:
        """One optimizer step on ``batch`` (its first ``batch_size`` nodes are the seeds);
        returns the mean loss and how many seeds were classified right. The caller puts
        the model in training mode (``train_epoch`` does)."""
        self.optimizer.zero_grad()
        logits = self._train_model(batch)
        target = batch.y[: batch.batch_size].long()
        loss = F.cross_entropy(logits, target)
        loss.backward()
        self.optimizer.step()
        return float(loss.detach()), int((logits.argmax(dim=-1) == target).sum())

    @torch.no_grad()
    def evaluate(self, split: str) -> float:
        """Accuracy on ``split`` (``'train'``, ``'val'`` or ``'test'``)."""
        self.model.eval()
        nodes = self.dataset.split(split)
        if self.eval_mode in ("full", "layerwise"):
            prediction = self._all_logits().argmax(dim=-1)[torch.from_numpy(nodes)]
            return float((prediction == self._y[torch.from_numpy(nodes)]).float().mean())
        loader = NeighborLoader(
            self.dataset,
            self.fanouts,
            batch_size=self.batch_size,
            input_nodes=nodes,
            seed=self.seed + 1,
            num_workers=self.num_workers,
            device=self.device,
        )
        correct = 0
        for batch in tqdm(loader, desc=f"eval {split}", disable=not self.progress, leave=False):
            logits = self._seed_logits(batch)
            correct += int((logits.argmax(dim=-1) == batch.y[: batch.batch_size]).sum())
        return correct / max(len(nodes), 1)

    def evaluate_all(self) -> dict:
        """``train_acc``, ``val_acc`` and ``test_acc`` by the evaluation mode (one pass of
        full or layer-wise inference serves all three)."""
        if self.eval_mode in ("full", "layerwise"):
            self.model.eval()
            prediction = self._all_logits().argmax(dim=-1)
            return {
                f"{split}_acc": float((prediction[index] == self._y[index]).float().mean())
                for split in SPLITS
                for index in [torch.from_numpy(np.array(self.dataset.split(split)))]
            }
        return {f"{split}_acc": self.evaluate(split) for split in SPLITS}

    def save_checkpoint(self, path: str | Path) -> None:
        """Save model, optimizer, epoch and every worker's RNG state so that training can
        resume. With several workers every rank must call it; rank 0 writes."""
        rng_states = [torch.get_rng_state()]
        if self.world_size > 1:
            rng_states = [None] * self.world_size
            dist.all_gather_object(rng_states, torch.get_rng_state())
        if self.rank != 0:
            return
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        state = {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "epoch": self.epoch,
            "torch_rng": rng_states,
        }
        temporary = path.with_suffix(path.suffix + ".tmp")
        torch.save(state, temporary)
        temporary.replace(path)

    def load_checkpoint(self, path: str | Path) -> None:
        """Restore what :meth:`save_checkpoint` saved."""
        state = torch.load(path, map_location="cpu", weights_only=True)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.epoch = int(state["epoch"])
        rng_states = state["torch_rng"]
        torch.set_rng_state(rng_states[self.rank % len(rng_states)])
        log.info("resumed from %s at epoch %d", path, self.epoch)

    def _all_logits(self) -> torch.Tensor:
        x = as_tensor(self.dataset.x)
        if self.eval_mode == "layerwise":
            return layerwise_inference(
                self.model, self.dataset.graph, x, device=self.device, progress=self.progress
            )
        edge_index = self.dataset.graph.to_edge_index().to(self.device)
        return self.model(x.to(self.device, torch.float32), edge_index).cpu()

    def _record(self, metrics: dict) -> None:
        if self.rank == 0:
            line = json.dumps(metrics)
            log.info("%s", line)
            if self.metrics_path is not None:
                with self.metrics_path.open("a") as f:
                    f.write(line + "\n")
        if self.checkpoint is not None:
            self.save_checkpoint(self.checkpoint)


FORWARDS = ("auto", "blocks", "trim", "whole")


class SeedLogits(torch.nn.Module):
    """``model``'s logits for a batch's seeds: ``[batch.batch_size, num_classes]``.

    ``forward``: ``'blocks'`` (:func:`~graphengine.blocks.block_forward`), ``'trim'``
    (PyG's ``trim_to_layer``), ``'whole'`` (``model(x, edge_index)`` on the whole batch), or
    ``'auto'``: the first of these that gives ``model``'s results. A module, so that
    ``DistributedDataParallel`` can wrap it.
    """

    def __init__(self, model: torch.nn.Module, num_hops: int, forward: str = "auto"):
        super().__init__()
        if forward not in FORWARDS:
            raise ValueError(f"'forward' must be one of {FORWARDS} (got {forward!r})")
        self.model = model
        allowed = ["whole"]
        if (
            isinstance(model, BasicGNN)
            and model.num_layers == num_hops
            and not normalizes_by_degree(model)
        ):
            allowed.insert(0, "trim")
            if supports_blocks(model):
                allowed.insert(0, "blocks")
        if forward != "auto" and forward not in allowed:
            raise ValueError(
                f"'forward' {forward!r} does not give this model's results on {num_hops}-hop "
                f"batches; it allows {allowed}"
            )
        self.mode = allowed[0] if forward == "auto" else forward

    def forward(self, batch) -> torch.Tensor:
        if self.mode == "blocks":
            blocks = to_blocks(batch.edge_index, batch.num_sampled_nodes, batch.num_sampled_edges)
            return block_forward(self.model, batch.x, blocks)
        if self.mode == "trim":
            return self.model(
                batch.x,
                batch.edge_index,
                num_sampled_nodes_per_hop=batch.num_sampled_nodes,
                num_sampled_edges_per_hop=batch.num_sampled_edges,
            )[: batch.batch_size]
        return self.model(batch.x, batch.edge_index)[: batch.batch_size]
