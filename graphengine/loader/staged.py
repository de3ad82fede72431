"""What loaders built from a fixed list of stages share: iterating them in the caller's thread
or through the :class:`~graphengine.loader.pipeline.Pipeline`, epochs, and stage times."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from graphengine.loader.pipeline import Pipeline, Stage, StageTimes
from graphengine.loader.stages import CopyToDevice
from graphengine.runtime import host_memory_cache


class StagedLoader:
    """Runs ``stages`` over the requests of ``seed_batches`` (anything iterable with ``len``
    and an ``epoch`` attribute): in the caller's thread with ``num_workers=0``, else in the
    pipeline's threads (``prefetch`` items in flight), each item then handed over through
    :meth:`_handed_over` in the caller's thread. Subclasses call :meth:`_set_stages`."""

    num_workers: int

    def _set_stages(
        self,
        seed_batches,
        stages: Sequence[Stage],
        prefetch: int,
        threaded: Sequence[Stage] | None = None,
    ) -> None:
        """``stages`` as the caller's thread runs them; ``threaded`` (the same by default) as
        the pipeline's threads do."""
        self._seed_batches = seed_batches
        self._stages = list(stages)
        self._pipeline = Pipeline(seed_batches, list(threaded or stages), prefetch=prefetch)
        self._times = self._pipeline.times

    def __len__(self) -> int:
        return len(self._seed_batches)

    def __iter__(self) -> Iterator[Any]:
        if self.num_workers == 0:
            return self._iterate_inline()
        return self._iterate_pipelined()

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration epoch ``epoch``: its order and samples follow from the seed."""
        self._seed_batches.epoch = epoch

    @property
    def stage_times(self) -> dict[str, float]:
        """Seconds spent per stage and ``waiting`` in the caller, in the current or last pass."""
        return self._times.snapshot()

    # Both iterations run in a host_memory_cache span (graphengine.runtime): the batches and
    # what the caller's training step allocates for them reuse the blocks of earlier steps
    # instead of page-faulting fresh ones. The span ends with the pass (or its iterator).
    def _iterate_inline(self) -> Iterator[Any]:
        self._times = StageTimes(stage.name for stage in self._stages)
        with host_memory_cache():
            for request in self._seed_batches:
                yield self._load(request, self._times)

    def _iterate_pipelined(self) -> Iterator[Any]:
        batches = iter(self._pipeline)
        self._times = self._pipeline.times
        try:
            with host_memory_cache():
                for batch in batches:
                    yield self._handed_over(batch, self._times)
        finally:
            batches.close()  # stops the pipeline's threads when the caller leaves early

    def _load(self, request: Any, times: StageTimes) -> Any:
        """One request through every stage in this thread, then handed over."""
        item = request
        for stage in self._stages:
            started = time.perf_counter()
            item = stage.function(item)
            times.add(stage.name, time.perf_counter() - started)
        return self._handed_over(item, times)

    def _handed_over(self, item: Any, times: StageTimes) -> Any:
        """What the caller gets for a loaded ``item`` (run in the caller's thread)."""
        return item


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
