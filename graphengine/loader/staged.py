"""How a loader runs: seeds -> stages. A loader is a source of seed batches and a list of
stages (:mod:`graphengine.loader.stages`); :class:`StagedLoader` runs every batch through
them in the caller's thread or in the :class:`~graphengine.loader.pipeline.Pipeline`'s
threads, hands each over in the caller's thread, and counts epochs and stage times."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from graphengine.loader.config import LoadingConfig
from graphengine.loader.pipeline import Pipeline, Stage, StageTimes
from graphengine.loader.seeds import BatchRequest, derive_seed
from graphengine.loader.stages import CopyToDevice, Transform
from graphengine.loader.threads import share_torch_threads
from graphengine.runtime import host_memory_cache
from samplers import check_node_ids


class StagedLoader:
    """Runs ``stages`` over the requests of ``seed_batches`` (anything iterable with ``len``
    and an ``epoch`` attribute): in the caller's thread with ``num_workers=0``, else in the
    pipeline's threads (``prefetch`` items in flight), each item then handed over in the
    caller's thread (through ``transform``, when given). Loaders call :meth:`_set_stages`
    once, when built."""

    num_workers: int

    def _set_stages(
        self,
        seed_batches,
        stages: Sequence[Stage],
        prefetch: int,
        threaded: Sequence[Stage] | None = None,
        transform: Callable[[Any], Any] | None = None,
    ) -> None:
        """``stages`` as the caller's thread runs them; ``threaded`` (the same by default) as
        the pipeline's threads do; ``transform`` on each item as it is handed over."""
        self._seed_batches = seed_batches
        self._stages = list(stages)
        self._pipeline = Pipeline(seed_batches, list(threaded or stages), prefetch=prefetch)
        self._transform = None if transform is None else Transform(transform)
        self._times = self._pipeline.times

    def __len__(self) -> int:
        return len(self._seed_batches)

    def __iter__(self) -> Iterator[Any]:
        return self._iterate()

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration epoch ``epoch``: its order and samples follow from the seed."""
        self._seed_batches.epoch = epoch

    @property
    def stage_times(self) -> dict[str, float]:
        """Seconds spent per stage and ``waiting`` in the caller, in the current or last pass."""
        return self._times.snapshot()

    def _iterate(self) -> Iterator[Any]:
        if self.num_workers == 0:
            self._times = StageTimes(stage.name for stage in self._stages)
            loaded = (self._run_stages(request, self._times) for request in self._seed_batches)
        else:
            loaded = iter(self._pipeline)
            self._times = self._pipeline.times
        try:
            # The one place loader/ enters graphengine.runtime's host_memory_cache: for the
            # pass, the batches and what the caller's training step allocates for them reuse
            # the blocks of earlier steps instead of page-faulting fresh ones. The span ends
            # with the pass (or its iterator).
            with host_memory_cache():
                for item in loaded:
                    yield self._handed_over(item, self._times)
        finally:
            loaded.close()  # stops the pipeline's threads when the caller leaves early

    def _load_positions(self, index) -> Any:
        """One batch for ``index``, positions into the seeds, loaded in this thread."""
        index = check_node_ids(index, self._seed_batches.num_seeds, "index")
        request = BatchRequest(index=index, seed=derive_seed(self._seed_batches.seed or 0, -1))
        times = StageTimes(stage.name for stage in self._stages)
        return self._handed_over(self._run_stages(request, times), times)

    def _run_stages(self, request: Any, times: StageTimes) -> Any:
        """One request through every stage in this thread."""
        item = request
        for stage in self._stages:
            started = time.perf_counter()
            item = stage.function(item)
            times.add(stage.name, time.perf_counter() - started)
        return item

    def _handed_over(self, item: Any, times: StageTimes) -> Any:
        """``transform(item)`` in the caller's thread, so that its random draws (from torch's
        global generator too) interleave with the caller's as without threads."""
        if self._transform is None:
            return item
        started = time.perf_counter()
        item = self._transform(item)
        times.add("transform", time.perf_counter() - started)
        return item


def sample_gather_stages(
    sample: Callable[[Any], Any], gather: Callable[[Any], Any], loading: LoadingConfig
) -> tuple[list[Stage], list[Stage]]:
    """The stages of a sampling loader, ``sample -> gather -> copy``, as the caller's thread
    runs them and as the pipeline's threads do: ``num_workers`` sampling threads, as many
    gathering threads (``filter_per_worker``) or one, each with its share of torch's threads
    (:func:`~graphengine.loader.threads.share_torch_threads`), and a copy to a CUDA
    ``device`` on a side stream."""
    gatherers = loading.threads if loading.filter_per_worker else 1
    stages = [Stage("sample", sample, loading.threads), Stage("gather", gather, gatherers)]
    if loading.copies_to_cuda:
        stages.append(Stage("copy", CopyToDevice(loading.device)))
    return stages, share_torch_threads(stages)


def copy_stages(device: str | torch.device | None) -> list[Stage]:
    """The stage that moves finished batches to ``device`` on a side stream: one for a CUDA
    device, none for the CPU or ``None`` (batches are built there).

    Raises:
        ValueError: ``device`` is not a device, or is a CUDA device without CUDA.
    """
    if device is None:
        return []
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"'device' must be a torch device or its name (got {device!r})") from None
    if device.type != "cuda":
        return []
    if not torch.cuda.is_available():
        raise ValueError(
            f"'device' {str(device)!r} needs CUDA, and torch.cuda.is_available() is False"
        )
    return [Stage("copy", CopyToDevice(device))]
