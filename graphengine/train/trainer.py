"""The training loop: node classification with any PyG model on sampled mini-batches.

The loop runs epochs, steps, evaluation and checkpoints over what a kind of training batches
(:mod:`graphengine.train.batches`) builds from a :class:`~graphengine.train.config.TrainConfig`
and a parallel :class:`~graphengine.parallel.Strategy`; it chooses no loader, feature store or
strategy itself.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

import torch
from tqdm import tqdm

from graphengine.data.disk_io import IoCounters
from graphengine.data.output_files import append_line
from graphengine.distributed.liveness import naming_lost_workers
from graphengine.parallel import Strategy, strategy_for
from graphengine.runtime import host_memory_cache
from graphengine.train.batches import TrainingBatches, training_batches
from graphengine.train.checkpoint import (
    check_resume_fields,
    check_trained_on,
    described,
    read_state,
    trained_on,
    write_state,
)
from graphengine.train.config import TrainConfig
from graphengine.train.evaluate import Evaluator
from graphengine.train.metrics import check_finite_loss, json_line, summary, traffic_metrics
from graphengine.train.planned import resolve_parallel
from graphengine.train.precision import step_precision
from graphengine.train.schedule import check_schedule, evaluation_due

log = logging.getLogger(__name__)


class Trainer:
    """Trains ``model`` on ``dataset``'s training nodes as a :class:`TrainConfig` says.

    ``dataset`` is a :class:`~graphengine.datasets.GraphDataset` (neighborhood batches of a
    :class:`~graphengine.NeighborLoader` or :class:`~graphengine.LaborLoader`, or subgraph
    batches), this worker's part of a partitioned graph
    (:class:`~graphengine.distributed.DistData`: a
    :class:`~graphengine.loader.dist_neighbor_loader.DistNeighborLoader`, data-parallel
    across the parts' workers, or with ``parallel="hybrid"`` a
    :class:`~graphengine.loader.dist_hybrid_loader.DistHybridNeighborLoader`), or a
    :class:`~graphengine.datasets.HeteroGraphDataset`
    (its target type's training nodes, in one process). Which batches, and how the model runs
    on them, is chosen by the first kind of :data:`graphengine.train.batches.KINDS` that takes
    the run (:attr:`batches`).

    ``model`` is any module called as ``model(x, edge_index)`` returning ``[num_nodes,
    num_classes]`` logits. PyG ``BasicGNN`` models with one layer per hop run layer by layer
    on the batch's blocks, each layer computing only the nodes the next one reads
    (:mod:`graphengine.nn.blocks`); with norms or jumping knowledge, they get the per-hop
    counts to trim finished layers instead (``trim_to_layer``). For a heterogeneous dataset,
    a module called as ``model(x_dict, edge_index_dict)`` returning a dict of
    ``[num_nodes[t], num_classes]`` logits per node type, its weights initialized.

    Args:
        model: the model to train.
        dataset: the graph, features, labels and splits.
        fanouts, batch_size: as in :class:`TrainConfig`, for the common positional call
            ``Trainer(model, dataset, fanouts, batch_size)``.
        config: the run's configuration; ``options`` override its fields (by default
            ``TrainConfig()``'s).
        strategy: how steps are split across workers; by default ``config.parallel``'s
            (:func:`~graphengine.parallel.strategy_for`) for the joined process group.
        options: fields of :class:`TrainConfig` (``lr=0.01``, ``precision="bf16"``, ...).

    Each epoch's metrics also hold ``io``: the process's major and minor page faults and the
    bytes it read from disk during the epoch (``read_bytes``; ``None`` where the platform
    does not say).
    """

    def __init__(
        self,
        model: torch.nn.Module,
        dataset,
        fanouts=None,
        batch_size: int | None = None,
        *,
        config: TrainConfig | None = None,
        strategy: Strategy | None = None,
        **options,
    ):
        if fanouts is not None:
            options["fanouts"] = fanouts
        if batch_size is not None:
            options["batch_size"] = batch_size
        config = (config or TrainConfig()).replace(**options)
        if strategy is None:  # 'auto': the planner's choice, before anything is built
            config, self.plan_metrics = resolve_parallel(model, dataset, config)
        else:
            self.plan_metrics = {}
        self.config = config
        self.strategy = strategy or strategy_for(config.device, config.parallel)
        self.device = self.strategy.device
        self.model = model.to(self.device)
        self.dataset = dataset
        self.batches: TrainingBatches = training_batches(self.model, dataset, config, self.strategy)
        self.evaluator = Evaluator(
            self.batches.eval_module,
            dataset,
            self.batches.eval_mode,
            list(config.fanouts),
            self.batches.worker_batch_size,
            seed=config.seed,
            num_workers=config.num_workers,
            strategy=self.strategy,
            progress=config.progress,
            sampled_loader=self.batches.eval_loader,
        )
        self.optimizer = torch.optim.Adam(
            self.batches.train_module.parameters(), lr=config.lr, weight_decay=config.weight_decay
        )
        self.epoch = 0
        if config.checkpoint is not None and self._every_rank_has_checkpoint():
            self.load_checkpoint(config.checkpoint)

    @property
    def train_loader(self):
        """The training batches' loader."""
        return self.batches.loader

    @property
    def batch_size(self) -> int:
        """Seeds per training step, all workers together."""
        return self.batches.batch_size

    @property
    def worker_batch_size(self) -> int:
        """Seeds per training step of this worker."""
        return self.batches.worker_batch_size

    @property
    def sampler(self) -> str:
        """The training batches' sampler (``'neighbor'``, ``'labor'``, ``'cluster'`` or
        ``'saint'``)."""
        return self.config.sampler_kind

    @property
    def precision(self) -> str:
        return self.config.precision

    @property
    def rank(self) -> int:
        return self.strategy.rank

    @property
    def world_size(self) -> int:
        return self.strategy.world_size

    @property
    def eval_mode(self) -> str:
        """How evaluation runs (``'full'``, ``'layerwise'`` or ``'sampled'``)."""
        return self.evaluator.mode

    @property
    def forward_mode(self) -> str:
        """How the model runs on a batch (``'blocks'``, ``'trim'`` or ``'whole'``)."""
        return self.batches.eval_module.mode

    def fit(
        self,
        epochs: int,
        eval_every: int = 1,
        on_epoch: Callable[[dict], None] | None = None,
    ) -> list[dict]:
        """Train until ``epochs`` epochs are done in total (resumed ones count).

        Returns one metrics dict per epoch run: ``epoch``, ``loss``, ``train_acc``
        (the running accuracy on the epoch's training batches of all workers, with dropout
        on and the weights changing, so it differs from an evaluation's ``train_acc``),
        ``val_acc`` (every ``eval_every`` epochs and at the last; never with
        ``eval_every=0``), ``epoch_s``, ``seeds_per_s`` (all workers),
        ``seeds_per_s_per_worker``, ``workers`` and ``stage_s``, this worker's seconds per
        stage: ``sample``, ``gather``, ``copy`` (in the loader's threads), ``compute`` and
        ``waiting`` (the training thread waiting for a batch); with ``parallel='auto'``,
        ``plan``: the planner's choice and its predicted epoch seconds and their parts.

        ``on_epoch(metrics)`` is called on the writing worker (rank 0) as each epoch ends,
        after its metrics line and checkpoint are written.

        Raises:
            WorkerLost: (:class:`graphengine.distributed.WorkerLost`) a collective failed
                because other workers stopped answering; the message names them.
            WriteError: (:class:`graphengine.data.WriteError`, an ``OSError``)
                the metrics line or the checkpoint could not be written (a full disk); the
                message names the file, which is left as it was.
        """
        check_schedule(epochs, eval_every)
        history = []
        # One span for all epochs: the blocks freed at the end of one epoch serve the next.
        with host_memory_cache(), naming_lost_workers():
            while self.epoch < epochs:
                metrics = self.train_epoch()
                if evaluation_due(self.epoch, epochs, eval_every):
                    metrics["val_acc"] = self.evaluate("val")
                history.append(metrics)
                self._record(metrics)
                if on_epoch is not None and self.strategy.is_writer:
                    on_epoch(metrics)
        self.strategy.assemble_model(self.batches.train_module)  # the user's model whole again
        return history

    def train_epoch(self) -> dict:
        """One pass over the training nodes; returns this epoch's metrics."""
        self.batches.train_module.train()
        self.batches.start_epoch(self.epoch)
        self.strategy.reset_stats()
        total_loss = correct = seen = feature_bytes = 0
        start = time.perf_counter()
        batches = tqdm(
            self.train_loader,
            desc=f"epoch {self.epoch + 1}",
            disable=not self.config.progress,
            leave=False,
        )
        compute = 0.0
        io_start = IoCounters.now()
        for step, batch in enumerate(batches, start=1):
            step_start = time.perf_counter()
            loss, right, size = self.step(batch)
            check_finite_loss(loss, self.epoch + 1, step)
            total_loss += loss * size
            correct += right
            seen += size
            feature_bytes += self.batches.feature_bytes(batch)
            compute += time.perf_counter() - step_start
        elapsed = time.perf_counter() - start
        self.epoch += 1
        local_seen = seen
        total_loss, correct, seen = self.strategy.sum([total_loss, correct, seen])
        stages = self.train_loader.stage_times
        stages["compute"] = compute
        metrics = {
            "epoch": self.epoch,
            "loss": total_loss / max(seen, 1),
            "train_acc": correct / max(seen, 1),
            "epoch_s": elapsed,
            "seeds_per_s": seen / elapsed if elapsed > 0 else 0.0,
            "seeds_per_s_per_worker": local_seen / elapsed if elapsed > 0 else 0.0,
            "workers": self.world_size,
            "stage_s": stages,
        }
        metrics.update(self.batches.epoch_metrics())
        metrics.update(self.plan_metrics)
        metrics["traffic"] = traffic_metrics(self.strategy, self.batches.traffic(), feature_bytes)
        metrics["io"] = IoCounters.now().since(io_start)
        return metrics

    def step(self, batch) -> tuple[float, int, int]:
        """One optimizer step on ``batch`` (its first ``batch_size`` nodes, of the target type
        for a heterogeneous batch, are the seeds; of a subgraph batch, its ``train_mask``
        nodes); returns the mean loss, how many of those nodes were classified right, and
        how many there were. The caller puts the model in training mode (``train_epoch``
        does)."""
        self.optimizer.zero_grad()
        with step_precision(self.config.precision, self.device):
            loss, logits, target = self.batches.loss(batch)
        loss.backward()
        self.optimizer.step()
        right = int((logits.argmax(dim=-1) == target).sum())
        return float(loss.detach()), right, len(target)

    def evaluate(self, split: str) -> float:
        """Accuracy on ``split`` (``'train'``, ``'val'`` or ``'test'``); every worker calls it."""
        return self.evaluator.accuracy(split)

    def evaluate_all(self) -> dict:
        """``train_acc``, ``val_acc`` and ``test_acc`` by the evaluation mode."""
        return self.evaluator.accuracies()

    def save_checkpoint(self, path: str | Path) -> None:
        """Save model, optimizer, epoch and every worker's RNG state so that training can
        resume. With several workers every rank must call it; rank 0 writes."""
        rng_states = self.strategy.gather_objects(torch.get_rng_state())
        self.strategy.assemble_model(self.batches.train_module)
        optimizer = self.optimizer.state_dict()
        if self.strategy.parameters_per_worker:
            optimizer = self.strategy.gather_objects(optimizer)
        if not self.strategy.is_writer:
            return
        state = {
            "model": self.model.state_dict(),
            "optimizer": optimizer,
            "epoch": self.epoch,
            "torch_rng": rng_states,
            "trained_on": trained_on(self.model, self.dataset),
        }
        write_state(path, state)

    def load_checkpoint(self, path: str | Path) -> None:
        """Restore what :meth:`save_checkpoint` saved.

        The optimizer's state (Adam's moments and step counts) comes from the checkpoint,
        its settings from this Trainer's config: a run resumed with another ``lr`` or
        ``weight_decay`` trains on with the new ones, and the log says which changed.

        Raises:
            ValueError: ``path`` is not a graphengine checkpoint, is corrupt, was trained
                on another model or dataset (the message says what differs), or a field
                it holds is of the wrong type, range or shape (the message names it).
        """
        state = read_state(path)
        check_resume_fields(state, path, torch.get_rng_state().numel())
        check_trained_on(state.get("trained_on"), trained_on(self.model, self.dataset), path)
        try:
            self.model.load_state_dict(state["model"])
        except RuntimeError as error:  # names or shapes not this model's
            shown = " ".join(str(error).split())  # torch's message spans lines
            raise ValueError(
                f"checkpoint '{path}': 'model' does not fit the model: {shown}"
            ) from None
        self.strategy.reshard_model(self.batches.train_module)
        self._load_optimizer_state(self._own_optimizer_state(state["optimizer"], path), path)
        self._apply_optimizer_settings(path)
        self.epoch = state["epoch"]
        rng_states = state["torch_rng"]
        torch.set_rng_state(rng_states[self.rank % len(rng_states)])
        log.info("resumed from %s at epoch %d", path, self.epoch)

    def _load_optimizer_state(self, saved: dict, path: str | Path) -> None:
        """Load ``saved`` (a state_dict checked for its form) into the optimizer, refusing
        one of other parameter groups or whose per-parameter tensors (Adam's moments) are
        not their parameter's shape: they would fail, or broadcast, at the first step."""
        try:
            self.optimizer.load_state_dict(saved)
        except (ValueError, KeyError, TypeError, RuntimeError) as error:
            shown = " ".join(str(error).split())
            raise ValueError(
                f"checkpoint '{path}': 'optimizer' does not fit this model's optimizer ({shown})"
            ) from None
        for parameter, moments in self.optimizer.state.items():
            for name, value in moments.items():
                if not _fits(name, value, parameter):
                    raise ValueError(
                        f"checkpoint '{path}': 'optimizer' state {name!r} of a parameter of "
                        f"shape {list(parameter.shape)} (got {described(value)}), expected a "
                        "tensor of that shape (a step count >= 0 for 'step')"
                    )

    def _apply_optimizer_settings(self, path: str | Path) -> None:
        """Put this run's ``lr`` and ``weight_decay`` back into the optimizer after a
        checkpoint's state replaced them, saying which differed."""
        wanted = {"lr": self.config.lr, "weight_decay": self.config.weight_decay}
        for group in self.optimizer.param_groups:
            for name, value in wanted.items():
                if group[name] != value:
                    log.warning(
                        "resuming %s with %s=%g (the checkpoint was trained with %g)",
                        path,
                        name,
                        value,
                        group[name],
                    )
                    group[name] = value

    def _own_optimizer_state(self, saved, path: str | Path) -> dict:
        """This worker's optimizer state in a checkpoint: the one state, or, when each worker
        trained parameters of its own (hybrid), its rank's of the list saved."""
        per_worker = isinstance(saved, list)
        if per_worker != self.strategy.parameters_per_worker:
            saved_as = "--parallel hybrid" if per_worker else "one model replica per worker"
            raise ValueError(
                f"checkpoint '{path}' was trained with {saved_as}; resume it the same way"
            )
        if not per_worker:
            return saved
        if len(saved) != self.world_size:
            raise ValueError(
                f"checkpoint '{path}' holds the optimizer states of {len(saved)} hybrid "
                f"workers: resume it with --nproc {len(saved)} (not {self.world_size})"
            )
        return saved[self.rank]

    def _every_rank_has_checkpoint(self) -> bool:
        """Whether every worker finds the checkpoint file (all resume) or none does (all
        start afresh); workers that disagree would run different epochs and wait forever at
        a collective, so that is an error on every rank."""
        checkpoint = self.config.checkpoint
        found = self.strategy.gather_objects(checkpoint.is_file())
        if any(found) and not all(found):
            missing = [rank for rank, has in enumerate(found) if not has]
            raise ValueError(
                f"checkpoint '{checkpoint}' exists for some workers but not for ranks "
                f"{missing}: put it where every worker sees it (a shared file system)"
            )
        return all(found)

    def _record(self, metrics: dict) -> None:
        """Log a readable summary of ``metrics``, append them as a JSON line to
        ``metrics_path`` (writer only) and save the checkpoint (every worker takes part)."""
        if self.strategy.is_writer:
            log.info("%s", summary(metrics))
            if self.config.metrics_path is not None:
                append_line(self.config.metrics_path, json_line(metrics))
        if self.config.checkpoint is not None:
            self.save_checkpoint(self.config.checkpoint)


def _fits(name: str, value, parameter: torch.Tensor) -> bool:
    """Whether an optimizer's per-parameter state ``name`` can be ``value``: a step count
    (one number >= 0) for ``step``, else a tensor of ``parameter``'s shape."""
    if not isinstance(value, torch.Tensor):
        return False
    if name == "step":
        return value.numel() == 1 and bool(value >= 0)
    return value.shape == parameter.shape
