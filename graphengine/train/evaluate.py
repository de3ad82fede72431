"""Accuracy of a node classifier on a dataset's splits: full-graph, layer-wise or sampled.

With several workers every rank takes part, so that none waits at a collective, bounded by
the process-group timeout, while another evaluates: full-graph and layer-wise inference run
on every rank (each gets the same exact answer), sampled evaluation splits the nodes across
ranks and sums the counts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
import torch
from tqdm import tqdm

from graphengine.data.arrays import as_tensor
from graphengine.datasets.dataset import SPLITS, GraphDataset
from graphengine.datasets.hetero import HeteroGraphDataset
from graphengine.distributed.data import DistData
from graphengine.loader import NeighborLoader
from graphengine.loader.dist_neighbor_loader import DistNeighborLoader
from graphengine.nn.blocks import supports_layerwise
from graphengine.nn.forward import SeedLogits
from graphengine.nn.inference import layerwise_inference
from graphengine.parallel.base import SingleProcess, Strategy
from graphengine.train.hetero import hetero_eval_mode, seed_store
from graphengine.train.labels import seed_labels, without_labels

# Full-graph evaluation needs the whole graph's activations in memory at once.
FULL_EVAL_MAX_EDGES = 5_000_000
SAMPLED_EVAL_SHARE = 0.1
EVAL_MODES = ("auto", "full", "layerwise", "sampled")


def resolve_eval_mode(
    mode: str, dataset: GraphDataset | DistData | HeteroGraphDataset, model: torch.nn.Module
) -> str:
    """``mode`` checked against ``model``; ``'auto'`` becomes ``'full'`` below 5M edges; else
    ``'sampled'`` when the validation and test nodes are under :data:`SAMPLED_EVAL_SHARE` of
    the graph (layer-wise would compute every node, and hold a hidden layer for all of them:
    papers100M labels 1.4% of its 111M nodes), else ``'layerwise'`` when the model allows it,
    else ``'sampled'``. A partitioned graph is
    evaluated ``'sampled'``, each worker on its part's nodes; a heterogeneous graph
    ``'sampled'`` too (``'full'`` and ``'layerwise'`` are refused)."""
    if mode not in EVAL_MODES:
        raise ValueError(f"'eval_mode' must be one of {EVAL_MODES} (got {mode!r})")
    if isinstance(dataset, HeteroGraphDataset):
        return hetero_eval_mode(mode)
    if isinstance(dataset, DistData):
        if mode in ("full", "layerwise"):
            raise ValueError(
                f"'eval_mode' {mode!r} is not available across the parts of a partitioned "
                "graph yet; use 'sampled' (or 'auto')"
            )
        return "sampled"
    if mode == "layerwise" and not supports_layerwise(model):
        raise ValueError(
            "'eval_mode' 'layerwise' needs a PyG BasicGNN without norms, jumping knowledge "
            f"or degree-normalizing GCN layers (got {type(model).__name__})"
        )
    if mode != "auto":
        return mode
    if dataset.graph.num_edges <= FULL_EVAL_MAX_EDGES:
        return "full"
    evaluated = len(dataset.val_idx) + len(dataset.test_idx)
    if evaluated < SAMPLED_EVAL_SHARE * dataset.num_nodes:
        return "sampled"
    return "layerwise" if supports_layerwise(model) else "sampled"


class Evaluator:
    """Accuracy of ``seed_logits.model`` on ``dataset``'s splits.

    Args:
        seed_logits: the model and how it runs on a sampled batch (for ``'sampled'``).
        dataset: graph, features, labels and splits (of the target node type of a
            :class:`~graphengine.datasets.HeteroGraphDataset`, which needs ``sampled_loader``).
        mode: ``'full'``, ``'layerwise'``, ``'sampled'`` or ``'auto'`` (see
            :func:`resolve_eval_mode`).
        fanouts, batch_size, seed, num_workers: the sampled evaluation's loader.
        strategy: who else evaluates; every worker must call the same methods.
        progress: show a tqdm progress bar.
        sampled_loader: builds the sampled evaluation's loader over this worker's nodes of
            a split (every worker calls it, and iterates it, even with no nodes); by
            default a :class:`NeighborLoader` (a :class:`DistNeighborLoader` for a part).
    """

    def __init__(
        self,
        seed_logits: SeedLogits,
        dataset: GraphDataset,
        mode: str,
        fanouts: list[int],
        batch_size: int,
        seed: int = 0,
        num_workers: int = 1,
        strategy: Strategy | None = None,
        progress: bool = False,
        sampled_loader: Callable[[np.ndarray], Iterable] | None = None,
    ):
        self.seed_logits = seed_logits
        self.model = seed_logits.model
        self.dataset = dataset
        self.mode = resolve_eval_mode(mode, dataset, self.model)
        self.fanouts = list(fanouts)
        self.batch_size = batch_size
        self.seed = seed
        self.num_workers = num_workers
        self.strategy = strategy or SingleProcess()
        self.progress = progress
        self.sampled_loader = sampled_loader
        self._target = dataset.target if isinstance(dataset, HeteroGraphDataset) else None
        if self._target is not None and sampled_loader is None:
            raise ValueError("a heterogeneous dataset is evaluated with a 'sampled_loader'")
        self._y = None if isinstance(dataset, DistData) else as_tensor(dataset.y)

    @property
    def device(self) -> torch.device:
        return self.strategy.device

    @torch.no_grad()
    def accuracy(self, split: str) -> float:
        """Accuracy on ``split`` (``'train'``, ``'val'`` or ``'test'``)."""
        return self.accuracies((split,))[f"{split}_acc"]

    @torch.no_grad()
    def accuracies(self, splits: tuple[str, ...] = SPLITS) -> dict[str, float]:
        """``{split}_acc`` for each of ``splits``; one pass of full or layer-wise inference
        serves them all."""
        self.model.eval()
        self.seed_logits.eval()  # a wrapper's own modules too (hybrid's split layers)
        if self.mode in ("full", "layerwise"):
            prediction = self._all_logits().argmax(dim=-1)
            result = {}
            for split in splits:
                index = torch.from_numpy(np.asarray(self.dataset.split(split)))
                result[f"{split}_acc"] = float((prediction[index] == self._y[index]).float().mean())
            return result
        return {f"{split}_acc": self._sampled(split) for split in splits}

    def _sampled(self, split: str) -> float:
        """Sampled mini-batches over this worker's share of ``split``; counts are summed over
        the workers. Of a partitioned graph, each worker takes its own part's nodes (and every
        worker iterates, as the batches are collectives); else every ``world_size``-th node."""
        kwargs = {
            "batch_size": self.batch_size,
            "seed": self.seed + 1,
            "num_workers": self.num_workers,
            "device": self.device,
        }
        if isinstance(self.dataset, DistData):
            mine = self.dataset.split(split)  # this part's own nodes
        else:
            nodes = np.asarray(self.dataset.split(split))
            mine = nodes[self.strategy.rank :: self.strategy.world_size]
        if self.sampled_loader is not None:
            loader = self.sampled_loader(mine)
        elif isinstance(self.dataset, DistData):
            loader = DistNeighborLoader(self.dataset, self.fanouts, input_nodes=mine, **kwargs)
        else:
            # On the CPU, batches without y: the seeds' labels are read from self._y.
            data = without_labels(self.dataset) if self.device.type == "cpu" else self.dataset
            loader = (
                NeighborLoader(data, self.fanouts, input_nodes=mine, **kwargs) if len(mine) else []
            )
        correct = 0
        for batch in tqdm(loader, desc=f"eval {split}", disable=not self.progress, leave=False):
            logits = self.seed_logits(batch)
            seeds = seed_store(batch, self._target)
            correct += int((logits.argmax(dim=-1) == seed_labels(seeds, self._y)).sum())
        correct, total = self.strategy.sum([correct, len(mine)])
        return correct / max(total, 1)

    def _all_logits(self) -> torch.Tensor:
        x = as_tensor(self.dataset.x)
        if self.mode == "layerwise":
            return layerwise_inference(
                self.model, self.dataset.graph, x, device=self.device, progress=self.progress
            )
        edge_index = self.dataset.graph.to_edge_index().to(self.device)
        return self.model(x.to(self.device, torch.float32), edge_index).cpu()
