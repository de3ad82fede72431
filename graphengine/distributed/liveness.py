"""Which worker stopped answering: a heartbeat over the rendezvous store, read when a
collective fails.

A collective that waits for a worker that was stopped, killed or cut off fails on every
other worker in the backend's words ("Timed out waiting ...ms for recv operation",
"Connection closed by peer [addr]:port"), which name no rank, and torchrun then calls the
worker that raised it the root cause. So every worker of a group runs a :class:`Heartbeat`
(started by :func:`~graphengine.distributed.launch.join`): a daemon thread that every
``interval_s`` seconds adds one to the worker's own counter in the store torchrun serves at
``MASTER_ADDR:MASTER_PORT`` (its own connection, not the process group's) and reads every
worker's counter. It needs no collective, so it still works once the group is broken, and a
worker whose process is stopped, killed or cut off stops counting.

When training fails, :func:`lost_worker` turns the failure into a :class:`WorkerLost` naming
the ranks whose counters have not moved for ``stale_s`` seconds, with their host addresses
and process ids; a worker that itself cannot reach the store names the workers on the
store's host. Where neither tells, the error says so instead of guessing. Each worker reads
the others' counters on its own clock, so no clocks are compared across hosts.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import re
import socket
import threading
import time
from dataclasses import dataclass

import torch.distributed as dist

log = logging.getLogger(__name__)

KEY = "graphengine/liveness"
# Words of the backends' collective failures (gloo's messages carry its source path, NCCL's
# its name), for errors that arrive as a plain RuntimeError rather than a DistError.
COLLECTIVE_MARKERS = ("gloo", "NCCL", "ProcessGroup", "monitoredBarrier")
# The C++ source location at the head of a backend's message ("[.../pair.cc:534] ").
SOURCE_LOCATION = re.compile(r"\[[^\]\s]+\.(?:cc|cpp|h|hpp):\d+\] ")


class WorkerLost(RuntimeError):
    """Training failed because other workers stopped answering.

    Attributes:
        ranks: the ranks that stopped answering; empty when it could not be told which.
    """

    def __init__(self, message: str, ranks: tuple[int, ...] = ()):
        super().__init__(message)
        self.ranks = tuple(ranks)


@dataclass(frozen=True)
class Peer:
    """A worker as the others name it: its rank, the address it reaches the store from,
    its process id."""

    rank: int
    address: str
    pid: int

    def __str__(self) -> str:
        return f"worker {self.rank} ({self.address}, pid {self.pid})"


class Heartbeat:
    """This worker's heartbeat in the store at ``store_host:store_port``, and its view of
    every other worker's.

    Args:
        rank, world_size: this worker's place in the group.
        timeout_s: the process group's timeout; the heartbeat's pace follows from it
            (``interval_s``: a twentieth of it, 0.1 to 1 s; ``stale_s``: half of it, 1 to
            10 s), so a worker that a collective waited out (for a timeout of 1 s or more)
            is stale by then.
        store_host, store_port: the rendezvous store (torchrun's ``MASTER_ADDR`` and
            ``MASTER_PORT``).
        namespace: keeps runs that share a store apart (torchrun's run id and restart).
    """

    def __init__(
        self,
        rank: int,
        world_size: int,
        timeout_s: float,
        store_host: str,
        store_port: int,
        namespace: str = "",
    ):
        if not timeout_s > 0:
            raise ValueError(f"'timeout_s' must be positive (got {timeout_s})")
        if not 0 <= rank < world_size:
            raise ValueError(f"'rank' must be in [0, world_size={world_size}) (got {rank})")
        self.rank = rank
        self.world_size = world_size
        self.timeout_s = timeout_s
        self.interval_s = min(1.0, max(0.1, timeout_s / 20))
        self.stale_s = min(10.0, max(1.0, timeout_s / 2))
        self.store_host = store_host
        self.store_port = store_port
        self._prefix = f"{KEY}/{namespace}"
        self._store: dist.Store | None = None
        self._lock = threading.Lock()
        self._seen = [0] * world_size
        self._moved = [0.0] * world_size  # time.monotonic() when each counter last moved
        self._answered = 0.0  # when the store last answered a whole round
        self.peers: list[Peer] = []
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Publish this worker's address, wait (up to ``timeout_s``) for every worker's, and
        start beating."""
        store = self._connect()
        address = _address_towards(self.store_host, self.store_port)
        # The count first: a worker whose address is read has a count to read too.
        store.add(self._key("beat", self.rank), 1)
        store.set(self._key("peer", self.rank), f"{address} {os.getpid()}")
        self.peers = []
        for rank in range(self.world_size):
            host, pid = store.get(self._key("peer", rank)).decode().split()
            self.peers.append(Peer(rank, host, int(pid)))
        now = time.monotonic()
        self._moved = [now] * self.world_size
        self._answered = now
        self._thread = threading.Thread(target=self._beat, name="heartbeat", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop beating (the others will see this worker as lost)."""
        self._stopped.set()

    def _key(self, kind: str, rank: int) -> str:
        return f"{self._prefix}/{kind}/{rank}"

    def _connect(self) -> dist.Store:
        self._store = dist.TCPStore(
            self.store_host,
            self.store_port,
            is_master=False,
            timeout=datetime.timedelta(seconds=self.timeout_s),
        )
        return self._store

    def _beat(self) -> None:
        while not self._stopped.wait(self.interval_s):
            try:
                self._round()
            except (RuntimeError, OSError) as error:  # the store is gone or reset
                log.debug("heartbeat: the store did not answer: %s", error)
                self._store = None  # a fresh connection next round: no answer read twice

    def _round(self) -> None:
        """Count one beat and read every worker's count. A store that does not answer
        blocks here (TCPStore's client has no timeout on a reply): the round's time then
        never comes, which is how the reader sees it."""
        store = self._store or self._connect()
        store.add(self._key("beat", self.rank), 1)
        counts = store.multi_get([self._key("beat", r) for r in range(self.world_size)])
        now = time.monotonic()
        with self._lock:
            for rank, count in enumerate(counts):
                if int(count) != self._seen[rank]:
                    self._seen[rank] = int(count)
                    self._moved[rank] = now
            self._answered = now

    def silent(self) -> tuple[list[int], float, float]:
        """``(ranks, ages, store_silence)``: the other ranks whose counters have not moved
        for ``stale_s`` by the last round the store answered, how long each has not, and the
        seconds since the store last answered."""
        now = time.monotonic()
        with self._lock:
            answered = self._answered
            moved = list(self._moved)
        others = (r for r in range(self.world_size) if r != self.rank)
        ranks = [r for r in others if answered - moved[r] > self.stale_s]
        ages = [now - moved[r] for r in ranks]
        return ranks, ages, now - answered

    def explain(self, error: BaseException) -> WorkerLost:
        """A :class:`WorkerLost` for the failed collective ``error``: the workers that
        stopped answering, waiting up to ``stale_s`` and two rounds for one to go stale (a
        killed worker's socket closes at once, before its heartbeat is missed)."""
        deadline = time.monotonic() + self.stale_s + 2 * self.interval_s
        while True:
            ranks, ages, store_silence = self.silent()
            if store_silence > self.stale_s:
                return self._store_lost(store_silence, error)
            if ranks:
                return self._lost(ranks, ages, error)
            if time.monotonic() >= deadline:
                break
            time.sleep(self.interval_s / 2)
        return WorkerLost(
            f"a collective failed, but every one of the {self.world_size} workers still "
            f"answers its heartbeat, so no lost worker can be named (one may have been busier "
            f"than the {self.timeout_s:g} s timeout, or a link between two workers broke): "
            f"{_first_line(error)}"
        )

    def _lost(self, ranks: list[int], ages: list[float], error: BaseException) -> WorkerLost:
        named = ", ".join(str(self.peers[r]) for r in ranks)
        it = "it" if len(ranks) == 1 else "them"
        return WorkerLost(
            f"lost {named}: stopped answering {min(ages):.0f} s ago (no heartbeat since); "
            f"the collective waiting for {it} failed: {_first_line(error)}",
            tuple(ranks),
        )

    def _store_lost(self, silence: float, error: BaseException) -> WorkerLost:
        """The store stopped answering this worker: its host (or the link to it) is what
        was lost; the workers there are the ones named."""
        store_address = _resolve(self.store_host)
        there = [p for p in self.peers if p.address == store_address and p.rank != self.rank]
        where = f"the rendezvous store at {self.store_host}:{self.store_port}"
        if not there:
            return WorkerLost(
                f"{where} stopped answering {silence:.0f} s ago, so it cannot be told which "
                f"workers are lost; the collective failed: {_first_line(error)}"
            )
        named = ", ".join(str(p) for p in there)
        return WorkerLost(
            f"lost {named}: {where}, on its host, stopped answering {silence:.0f} s ago "
            f"(this worker's link to it is down, or the host is); the other workers could not "
            f"be checked; the collective failed: {_first_line(error)}",
            tuple(p.rank for p in there),
        )


_current: Heartbeat | None = None


def start_heartbeat(rank: int, world_size: int, timeout_s: float) -> Heartbeat | None:
    """Start this worker's heartbeat in the store torchrun serves (``MASTER_ADDR``,
    ``MASTER_PORT``); ``None`` (and :func:`lost_worker` names no one) without one, or alone."""
    global _current
    host, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
    if world_size < 2 or host is None or port is None:
        return None
    run = os.environ.get("TORCHELASTIC_RUN_ID", "run")
    namespace = f"{run}/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}"
    heartbeat = Heartbeat(rank, world_size, timeout_s, host, int(port), namespace)
    heartbeat.start()
    if _current is not None:
        _current.stop()  # of a group this process joined before
    _current = heartbeat
    return heartbeat


def lost_worker(error: BaseException) -> WorkerLost | None:
    """What ``error`` means for a worker of a group: ``error`` itself when it is a
    :class:`WorkerLost`; for a failed collective, a :class:`WorkerLost` naming the workers
    that stopped answering (waiting up to the heartbeat's ``stale_s`` for one to), or saying
    that none can be named; ``None`` for any other error (a bug keeps its traceback), or
    without a heartbeat."""
    if isinstance(error, WorkerLost):
        return error
    if _current is None or not is_collective_failure(error):
        return None
    return _current.explain(error)


@contextlib.contextmanager
def naming_lost_workers():
    """Within the block, a failed collective is raised as the :class:`WorkerLost`
    :func:`lost_worker` makes of it (the original its ``__cause__``); other errors pass."""
    try:
        yield
    except Exception as error:
        lost = lost_worker(error)
        if lost is None or lost is error:
            raise
        raise lost from error


def is_collective_failure(error: BaseException) -> bool:
    """Whether ``error``, or an error it was raised from, is a failed collective or store
    operation."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, dist.DistError):
            return True
        if isinstance(error, RuntimeError) and any(m in str(error) for m in COLLECTIVE_MARKERS):
            return True
        error = error.__cause__ or error.__context__
    return False


def _first_line(error: BaseException) -> str:
    """``error``'s type and first line, without C++ source locations."""
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {SOURCE_LOCATION.sub('', lines[0] if lines else '')}"


def _resolve(host: str) -> str:
    """``host``'s IPv4 address (itself when it does not resolve)."""
    try:
        return socket.gethostbyname(host)
    except OSError:
        return host


def _address_towards(host: str, port: int) -> str:
    """The local address this machine reaches ``host`` from: the one the other workers
    know it by (no packet is sent: connecting a UDP socket only picks the route)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((_resolve(host), port))
            return probe.getsockname()[0]
    except OSError:
        return socket.gethostname()
