"""Data-parallel training with torch.distributed: launching, joining and helpers.

Workers are started by torchrun (``torchrun --nproc-per-node N -m graphengine train ...``,
multi-node with its rendezvous flags) or by ``graphengine train --nproc N``, which runs
torchrun's own launcher on this machine. The backend is NCCL when workers have GPUs,
gloo otherwise. The process group has a timeout, so a worker that dies makes the others
fail within it instead of hanging; each worker's heartbeat
(:mod:`graphengine.distributed.liveness`) tells them which worker stopped answering, and a
worker that fails for that reason says so in torchrun's error file
(:func:`record_failure`), so that torchrun's "Root Cause" names the lost rank too. A
worker whose launcher is gone (killed, so that it could not stop its workers) stops too
(:func:`watch_launcher`).
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import sys
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist

from graphengine.distributed.liveness import lost_worker, start_heartbeat

if TYPE_CHECKING:
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

log = logging.getLogger(__name__)

#: The exit status of a run stopped by Ctrl-C (SIGINT), as a shell reports it: 128 + 2.
INTERRUPTED = 128 + 2
#: The exit status of a run that lost a worker: it stopped answering, or a signal ended it.
LOST_WORKER = 3


def launched_by_torchrun() -> bool:
    """Whether this process is a worker started by torchrun (its environment says so)."""
    return "LOCAL_RANK" in os.environ and "WORLD_SIZE" in os.environ


def join(timeout_s: float) -> tuple[int, int]:
    """Join the process group torchrun describes; returns ``(rank, world_size)``.

    Uses NCCL when CUDA is available (each worker on ``cuda:LOCAL_RANK``), else gloo.
    Collectives that wait longer than ``timeout_s`` seconds raise; the worker's heartbeat
    starts, so that :func:`~graphengine.distributed.liveness.lost_worker` can name a worker
    that stopped answering. After torchrun restarted the workers, each attempt joins in
    its own keys of torchrun's store (:func:`attempt_store`) and the log says which restart
    it is. First of all, the worker starts watching its launcher (:func:`watch_launcher`).
    """
    watch_launcher(int(os.environ.get("RANK", 0)))
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    timeout = datetime.timedelta(seconds=timeout_s)
    store = attempt_store(timeout)
    if store is None:
        dist.init_process_group(backend, timeout=timeout)
    else:
        rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        dist.init_process_group(
            backend, store=store, rank=rank, world_size=world_size, timeout=timeout
        )
    _check_numba_threads()
    rank, world_size = dist.get_rank(), dist.get_world_size()
    start_heartbeat(rank, world_size, timeout_s)
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    again = f", restart {restart} of {os.environ.get('TORCHELASTIC_MAX_RESTARTS')}"
    log.info("rank %d of %d joined (%s%s)", rank, world_size, backend, again if restart else "")
    return rank, world_size


def watch_launcher(rank: int, interval_s: float = 1.0) -> threading.Thread:
    """End this worker (exit code :data:`INTERRUPTED`, after a log line saying why) once the
    process that started it is gone; returns the watching thread (a daemon).

    torchrun's agent stops its workers when it is interrupted (SIGINT, SIGTERM), but one
    that is killed (SIGKILL, out of memory) cannot: its workers, each in a session of its
    own, would train on unsupervised to the end, holding their cores and GPUs. The thread
    checks every ``interval_s`` seconds whether this process's parent (the launcher, or a
    user's ``torchrun``: the agent starts its workers itself) is still the one it had when
    the watch started. ``PR_SET_PDEATHSIG`` would do it without a thread, but on Linux only
    and silently. A launcher killed before the worker got this far (while it imports) is
    not seen; the worker then fails joining the group within ``--dist-timeout``, as the
    launcher's store is gone.
    """
    launcher = os.getppid()

    def watch() -> None:
        while os.getppid() == launcher:
            time.sleep(interval_s)
        log.error(
            "rank %d: the process that started this worker (pid %d) is gone, so nothing "
            "supervises it any more: stopping",
            rank,
            launcher,
        )
        finish(INTERRUPTED, wait=False)

    thread = threading.Thread(target=watch, name="launcher-watch", daemon=True)
    thread.start()
    return thread


def attempt_store(timeout: datetime.timedelta) -> dist.Store | None:
    """The store this attempt's process group rendezvouses in, where torchrun's agent serves
    one (``TORCHELASTIC_USE_AGENT_STORE``): the agent's store, its keys under this restart's
    prefix (``TORCHELASTIC_RESTART_COUNT``); ``None`` elsewhere (torch's own ``env://``).

    The agent keeps one store for all of a run's restarts, and torch's ``env://`` gives the
    workers it unprefixed, so after a restart the backend reads the addresses the previous
    attempt's workers published: a restarted gloo worker connects to a dead worker's port
    and fails ("Gloo connectFullMesh failed ... Connection refused"), and NCCL can read a
    stale unique id (pytorch/pytorch#135712). Torch before 2.5 prefixed by restart too.
    """
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != str(True):
        return None
    store = dist.TCPStore(
        os.environ["MASTER_ADDR"],
        int(os.environ["MASTER_PORT"]),
        int(os.environ["WORLD_SIZE"]),
        is_master=False,
        timeout=timeout,
    )
    restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    return dist.PrefixStore(f"graphengine/attempt/{restart}", store)


def host_cores() -> int:
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def cores_per_worker(workers: int) -> int:
    """This host's cores (those this process may run on) shared among ``workers``, at least 1."""
    return max(1, host_cores() // max(1, workers))


def numba_threads_env(workers: int) -> dict[str, str]:
    """The environment that gives each of ``workers`` processes on this host its share of
    the cores for Numba: ``NUMBA_NUM_THREADS``, empty where the user set it or for one
    worker (which keeps every core)."""
    if workers <= 1 or "NUMBA_NUM_THREADS" in os.environ:
        return {}
    return {"NUMBA_NUM_THREADS": str(cores_per_worker(workers))}


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """This process's environment with ``values`` for the block, as it was after it: Numba
    re-reads its settings from the environment when it compiles, and this process's own
    threads were launched with the old ``NUMBA_NUM_THREADS``."""
    previous = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in previous.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _check_numba_threads() -> None:
    """Warn a worker that shares its host with others but whose Numba uses every core.

    torchrun gives each of several workers on a host one torch thread (``OMP_NUM_THREADS``),
    but Numba reads only ``NUMBA_NUM_THREADS``, when it is imported: each worker's sampling
    kernels then use every core, and their idle OpenMP threads spin on the cores the other
    workers compute on, which stalls those workers' training steps (docs/benchmarks-archive.md,
    issue 32). Only the environment can fix that, so :func:`launch` sets it, and a user's
    own torchrun is told how.
    """
    local_workers = int(os.environ.get("LOCAL_WORLD_SIZE", 1))
    if local_workers > 1 and "NUMBA_NUM_THREADS" not in os.environ:
        log.warning(
            "%d workers share this host but NUMBA_NUM_THREADS is unset, so each samples on "
            "all its cores and they slow each other's steps: start torchrun with "
            "NUMBA_NUM_THREADS=%d",
            local_workers,
            cores_per_worker(local_workers),
        )


def local_device() -> torch.device:
    """This worker's device: ``cuda:LOCAL_RANK`` with CUDA, else the CPU."""
    if torch.cuda.is_available():
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
    return torch.device("cpu")


def finish(code: int = 0, wait: bool = True) -> None:
    """End this worker: wait for the others (unless ``wait=False``, for a worker that
    already met them at a barrier), flush output, exit without interpreter teardown. A
    barrier that fails (another worker ended without reaching it) is logged naming the
    worker lost where the heartbeats tell, and the exit code is then :data:`LOST_WORKER`.

    Tearing down a gloo process group can deadlock: its destructor joins gloo's worker
    threads while holding the GIL, and a worker thread still releasing the Python tensor
    of the last collective waits for the GIL (seen here as a hang at exit in about one run
    in six, with py-spy showing ``~ProcessGroupGloo`` in ``std::thread::join``). Every file
    the worker wrote is closed by then, so skipping the teardown loses nothing; so a failed
    barrier ends the worker here too, rather than raising into that teardown, where a
    worker whose agent waits for it alone could hang for good.
    """
    if wait:
        try:
            dist.barrier()
        except Exception as error:
            lost = lost_worker(error) or error
            record_failure(lost)  # before the log line, as train_node's lost worker
            log.error("rank %d: the workers did not all reach the end: %s", dist.get_rank(), lost)
            code = LOST_WORKER
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a reader gone (its pipe broken)
            stream.flush()
    logging.shutdown()
    os._exit(code)


@contextlib.contextmanager
def ending_on_error(rank: int, world_size: int) -> Iterator[None]:
    """Within the block, an error of worker ``rank`` of ``world_size`` > 1 (a bug: the
    caller handles the others) is logged with its traceback, written to torchrun's error
    file (:func:`record_failure`: its "Root Cause" then quotes it), and ends the worker with
    exit code 1 through :func:`finish`: raised out of it, it would have the interpreter tear
    the process group down, which can hang for good. Alone, the error passes."""
    try:
        yield
    except Exception as error:
        if world_size == 1:
            raise
        log.exception("rank %d failed", rank)
        record_failure(error)
        finish(1, wait=False)


def record_failure(error: BaseException) -> None:
    """Write ``error`` to the file torchrun gave this worker (``TORCHELASTIC_ERROR_FILE``),
    as an uncaught exception under torchrun's ``@record`` would: its "Root Cause" then
    quotes this message rather than an exit code. Nothing without torchrun."""
    from torch.distributed.elastic.multiprocessing.errors import ErrorHandler

    if "TORCHELASTIC_ERROR_FILE" in os.environ:
        ErrorHandler().record_exception(error)


def launch(nproc: int, argv: list[str], max_restarts: int = 0) -> int:
    """Run ``graphengine <argv>`` in ``nproc`` workers on this machine through torchrun,
    each with its share of the cores for Numba (``NUMBA_NUM_THREADS``, unless set). When a
    worker fails, torchrun stops the others and starts them all again, up to
    ``max_restarts`` times (its ``--max-restarts``); a training with a checkpoint resumes
    from it.

    Returns 0 when every worker succeeded (after restarts, if any); 130 when the launcher
    was interrupted (SIGINT, SIGTERM, SIGHUP: torchrun passes the signal on to the workers,
    and rank 0 says where its last checkpoint is); otherwise, once no restart is left, logs
    torchrun's error, which names the failed rank and its exit code, and returns
    :func:`failure_exit_code`.
    """
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import main as torchrun

    try:
        with _environment(numba_threads_env(nproc)):  # torchrun's workers inherit it
            torchrun(
                [
                    "--standalone",
                    f"--nproc-per-node={nproc}",
                    f"--max-restarts={max_restarts}",
                    "-m",
                    "graphengine",
                    *argv,
                ]
            )
    except ChildFailedError as error:
        log.error("%s", error.format_msg())
        return failure_exit_code(error)
    except SignalException as error:  # torchrun's agent turns SIGINT/SIGTERM into this
        log.error("interrupted (%s): the workers were stopped", error.sigval.name)
        return INTERRUPTED
    return 0


def failure_exit_code(error: ChildFailedError) -> int:
    """The launcher's exit code for workers that failed (``error``, from torchrun): the code
    of the first worker that failed (2: the user's error, 3: it lost another worker, 1: a
    bug's traceback), or :data:`LOST_WORKER` where a signal ended that worker (killed, out
    of memory, crashed), which is logged naming its rank and the signal."""
    rank, failure = error.get_first_failure()
    if failure.exitcode > 0:
        return failure.exitcode
    log.error(
        "rank %d (pid %d) was ended by %s, without an error of its own: the run lost it",
        rank,
        failure.pid,
        failure.signal_name(),
    )
    return LOST_WORKER
