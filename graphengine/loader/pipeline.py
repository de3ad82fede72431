"""How a loader runs: seeds -> stages. A loader is a source of seed batches and a list of
stages (:mod:`graphengine.loader.stages`); :class:`StagedLoader` runs every batch through
them in the caller's thread or in a :class:`Pipeline` of threads, hands each over in the
caller's thread, and counts epochs and stage times.

The pipeline is like DGL GraphBolt's datapipes (item sampler -> subgraph sampler -> feature
fetcher -> copy-to-device), but in threads of one process: the Numba sampler and the C++
gather release the GIL, so threads overlap them without pickling or copying batches.

Items come out in the order they went in, whatever the number of workers per stage. At
most ``prefetch`` items are in flight (in a stage or waiting for the caller) besides the
one the caller holds. An exception in a stage is re-raised in the caller at that item's
turn; leaving the loop early, an exception, Ctrl-C (even while the threads are starting)
or garbage collection of the iterator stop every thread, and so does the interpreter's
exit for an iterator still held then: a thread left inside the Numba or C++ kernels while
Python finalizes is stopped mid-call, which aborts the process ("terminate called without
an active exception").

Kept rather than ``torchdata.nodes`` (``ParallelMapper(method="thread", in_order=True)``
-> ``Prefetcher``, which runs the same sample and gather functions as fast, with the same
batches), for correctness: leaving a pass early (``break``) left torchdata's threads
running (its ``__del__`` raised "cannot join current thread" from one of them), and the
next pass hung in ``ParallelMapper.__next__`` while the previous pass's threads still
gathered. This pipeline stops every thread of a pass it leaves, times each stage and bounds
the items in flight exactly.
"""

from __future__ import annotations

import atexit
import queue
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from graphengine.loader.config import LoadingConfig, check_device
from graphengine.loader.seeds import BatchRequest, SeedBatches, derive_seed
from graphengine.loader.stages import CopyToDevice, InWorkerThreads, Transform
from graphengine.runtime import host_memory_cache
from samplers import check_node_ids

_POLL_S = 0.05
_JOIN_S = 5.0

_live_runs: weakref.WeakSet[_Run] = weakref.WeakSet()


@dataclass(frozen=True)
class Stage:
    """One step: ``function`` applied to each item by ``workers`` threads."""

    name: str
    function: Callable[[Any], Any]
    workers: int = 1

    def __post_init__(self):
        if self.workers < 1:
            raise ValueError(f"stage '{self.name}' needs at least one worker (got {self.workers})")


@dataclass(frozen=True)
class _Failure:
    error: BaseException


_END = object()


class StageTimes:
    """Seconds each stage spent working (summed over its threads), and the caller waiting;
    and each stage's seconds per item (its position in the pass), where the stage said which.
    """

    def __init__(self, names: Iterable[str]):
        self._lock = threading.Lock()
        self.seconds = dict.fromkeys([*names, "waiting"], 0.0)
        self._per_item: dict[str, dict[int, float]] = {}

    def add(self, name: str, seconds: float, item: int | None = None) -> None:
        with self._lock:
            self.seconds[name] = self.seconds.get(name, 0.0) + seconds
            if item is not None:
                own = self._per_item.setdefault(name, {})
                own[item] = own.get(item, 0.0) + seconds

    def snapshot(self) -> dict[str, float]:
        with self._lock:
            return dict(self.seconds)

    def per_item(self) -> dict[str, dict[int, float]]:
        with self._lock:
            return {name: dict(items) for name, items in self._per_item.items()}


class Pipeline:
    """Runs the items of ``source`` through ``stages``; iterate it for the results, in order.

    Args:
        source: the items (each iteration of the pipeline iterates ``source`` once).
        stages: applied in order.
        prefetch: items in flight ahead of the caller (bounded queues), at least 1.
    """

    def __init__(self, source: Iterable, stages: Sequence[Stage], prefetch: int = 2):
        if not stages:
            raise ValueError("'stages' must hold at least one stage")
        if prefetch < 1:
            raise ValueError(f"'prefetch' must be at least 1 (got {prefetch})")
        self.source = source
        self.stages = list(stages)
        self.prefetch = prefetch
        self.times = StageTimes(stage.name for stage in self.stages)

    def __iter__(self) -> Iterator[Any]:
        """A new pass over ``source``; :attr:`times` then counts this pass."""
        self.times = StageTimes(stage.name for stage in self.stages)
        return _Run(self).results()


class _Run:
    """One pass over the source: the threads, queues and reorder buffer of one iteration."""

    def __init__(self, pipeline: Pipeline):
        self.pipeline = pipeline
        self.stop = threading.Event()
        self.tickets = threading.Semaphore(pipeline.prefetch)
        self.queues = [queue.Queue() for _ in range(len(pipeline.stages) + 1)]
        self.threads: list[threading.Thread] = []

    def results(self) -> Iterator[Any]:
        times = self.pipeline.times
        pending: dict[int, Any] = {}
        expected = 0
        finished = False
        _live_runs.add(self)
        try:
            self._start()
            while True:
                while expected not in pending and not finished:
                    waited = time.perf_counter()
                    seq, item = self._get(self.queues[-1])
                    times.add("waiting", time.perf_counter() - waited)
                    if item is _END:
                        finished = True
                    else:
                        pending[seq] = item
                if expected not in pending:
                    return
                item = pending.pop(expected)
                expected += 1
                self.tickets.release()
                if isinstance(item, _Failure):
                    raise item.error
                yield item
        finally:
            _live_runs.discard(self)
            self._shutdown()

    def _start(self) -> None:
        self._spawn("feeder", self._feed)
        for index, stage in enumerate(self.pipeline.stages):
            remaining = [stage.workers]
            lock = threading.Lock()
            for worker in range(stage.workers):
                self._spawn(f"{stage.name}-{worker}", self._work, index, stage, remaining, lock)

    def _spawn(self, name: str, target, *args) -> None:
        thread = threading.Thread(target=target, args=args, name=f"graphengine-{name}", daemon=True)
        self.threads.append(thread)
        thread.start()

    def _feed(self) -> None:
        first = self.pipeline.stages[0]
        seq = 0
        items = iter(self.pipeline.source)
        while True:
            try:
                item = next(items)
            except StopIteration:
                break
            except BaseException as error:  # the source failed: deliver it as the next item
                self.queues[0].put((seq, _Failure(error)))
                break
            while not self.tickets.acquire(timeout=_POLL_S):
                if self.stop.is_set():
                    return
            if self.stop.is_set():
                return
            self.queues[0].put((seq, item))
            seq += 1
        for _ in range(first.workers):
            self.queues[0].put((None, _END))

    def _work(self, index: int, stage: Stage, remaining: list[int], lock: threading.Lock) -> None:
        inbox, outbox = self.queues[index], self.queues[index + 1]
        times = self.pipeline.times
        for seq, item in self._items(inbox):
            if not isinstance(item, _Failure):
                started = time.perf_counter()
                try:
                    item = stage.function(item)
                except BaseException as error:  # delivered to the caller at this item's turn
                    item = _Failure(error)
                times.add(stage.name, time.perf_counter() - started, seq)
            outbox.put((seq, item))
        if self.stop.is_set():
            return
        with lock:
            remaining[0] -= 1
            last = remaining[0] == 0
        if last:
            stages = self.pipeline.stages
            followers = stages[index + 1].workers if index + 1 < len(stages) else 1
            for _ in range(followers):
                outbox.put((None, _END))

    def _items(self, inbox: queue.Queue) -> Iterator[tuple[int, Any]]:
        """``(seq, item)`` pairs from ``inbox`` until its end marker or a stop."""
        while True:
            try:
                seq, item = self._get(inbox)
            except _Stopped:
                return
            if item is _END:
                return
            yield seq, item

    def _get(self, inbox: queue.Queue):
        while True:
            if self.stop.is_set():
                raise _Stopped
            try:
                return inbox.get(timeout=_POLL_S)
            except queue.Empty:
                continue

    def _shutdown(self) -> None:
        self.stop.set()
        current = threading.current_thread()
        deadline = time.monotonic() + _JOIN_S
        for thread in self.threads:
            if thread is not current:
                _join(thread, deadline)


def _join(thread: threading.Thread, deadline: float) -> None:
    """Wait for ``thread`` to end, until ``deadline`` (``time.monotonic()``), also when a
    Ctrl-C interrupted its ``start()`` before the thread had said it runs (``join`` then
    raises ``RuntimeError``)."""
    while True:
        try:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
            return
        except RuntimeError:
            if time.monotonic() > deadline:
                return
            time.sleep(0.001)


@atexit.register
def _stop_live_runs() -> None:
    """Stop the threads of every pass still open when the interpreter exits."""
    for run in list(_live_runs):
        run._shutdown()


class _Stopped(Exception):
    """Raised inside worker threads when the run is stopped."""


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

    def _run_seed_batches(
        self,
        num_seeds: int,
        loading: LoadingConfig,
        sample: Callable[[BatchRequest], Any],
        gather: Callable[[Any], Any],
        transform: Callable[[Any], Any] | None,
    ) -> None:
        """Batches of positions into ``num_seeds`` seeds as ``loading`` says -> ``sample`` ->
        ``gather`` -> copy (:func:`sample_gather_stages`), then ``transform``: how the
        node and link neighbor loaders run."""
        self.loading = loading
        self.num_seeds = num_seeds
        self.transform = transform
        self.num_workers = loading.num_workers
        self.filter_per_worker = loading.filter_per_worker
        self.prefetch = loading.prefetch
        self.device = loading.device
        self.seed = loading.seed
        seed_batches = SeedBatches(
            num_seeds,
            loading.batch_size,
            loading.shuffle,
            loading.drop_last,
            loading.seed,
            loading.rank,
            loading.world_size,
        )
        stages, threaded = sample_gather_stages(sample, gather, loading)
        self._set_stages(seed_batches, stages, loading.in_flight, threaded, transform)

    def __len__(self) -> int:
        return len(self._seed_batches)

    @property
    def dataset(self) -> range:
        """The positions the loader batches (its input nodes, seed edges, clusters or steps),
        as the ``dataset`` of PyG's loaders, which are torch ``DataLoader``s over them:
        ``len(loader.dataset)`` counts them (progress bars read it)."""
        return range(self._seed_batches.num_seeds)

    def __iter__(self) -> Iterator[Any]:
        return self._iterate()

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration epoch ``epoch``: its order and samples follow from the seed."""
        self._seed_batches.epoch = epoch

    @property
    def stage_times(self) -> dict[str, float]:
        """Seconds spent per stage and ``waiting`` in the caller, in the current or last pass."""
        return self._times.snapshot()

    @property
    def batch_stage_times(self) -> dict[str, dict[int, float]]:
        """Per stage, the seconds it spent on each batch (by its position in the current or
        last pass) so far: what :attr:`stage_times` sums, batch by batch."""
        return self._times.per_item()

    def _iterate(self) -> Iterator[Any]:
        if self.num_workers == 0:
            self._times = StageTimes(stage.name for stage in self._stages)
            loaded = (
                self._run_stages(request, self._times, i)
                for i, request in enumerate(self._seed_batches)
            )
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

    def _run_stages(self, request: Any, times: StageTimes, position: int | None = None) -> Any:
        """One request (the pass's ``position``-th) through every stage in this thread."""
        item = request
        for stage in self._stages:
            started = time.perf_counter()
            item = stage.function(item)
            times.add(stage.name, time.perf_counter() - started, position)
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
        ValueError: ``device`` is refused by :func:`check_device`.
    """
    if device is None:
        return []
    device = check_device(device)
    if device.type != "cuda":
        return []
    return [Stage("copy", CopyToDevice(device))]


def share_torch_threads(stages: Sequence[Stage]) -> list[Stage]:
    """``stages`` as the pipeline's threads run them: a ``"gather"`` stage of several threads
    runs each in its share of torch's intra-op threads (:class:`InWorkerThreads`), so that
    they split the cores instead of each sizing its parallel gathers to all of them."""
    threaded = []
    for stage in stages:
        share = max(1, torch.get_num_threads() // stage.workers)
        if stage.name == "gather" and share < torch.get_num_threads():
            stage = Stage(stage.name, InWorkerThreads(stage.function, share), stage.workers)
        threaded.append(stage)
    return threaded
