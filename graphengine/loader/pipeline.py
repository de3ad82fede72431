"""A pipeline of small stages in threads: each item flows through every stage in turn.

Like DGL GraphBolt's datapipes (item sampler -> subgraph sampler -> feature fetcher ->
copy-to-device), but in threads of one process: the Numba sampler and the C++ gather
release the GIL, so threads overlap them without pickling or copying batches.

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
    """Seconds each stage spent working (summed over its threads), and the caller waiting."""

    def __init__(self, names: Iterable[str]):
        self._lock = threading.Lock()
        self.seconds = dict.fromkeys([*names, "waiting"], 0.0)

    def add(self, name: str, seconds: float) -> None:
        with self._lock:
            self.seconds[name] = self.seconds.get(name, 0.0) + seconds

    def snapshot(self) -> dict[str, float]:
        with self._lock:
            return dict(self.seconds)


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
                times.add(stage.name, time.perf_counter() - started)
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
