"""The launcher and its workers: the exit code of a run whose worker failed (its own code, or
3 for a worker a signal ended, named)."""

import logging
import signal

import pytest
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

from graphengine.distributed.launch import LOST_WORKER, failure_exit_code


def failed(*failures: tuple[int, int, int]) -> ChildFailedError:
    """torchrun's error for workers that failed, each ``(rank, pid, exitcode)`` in the order
    they were seen (without error files, torchrun stamps each when it sees it)."""
    return ChildFailedError(
        "graphengine",
        {rank: ProcessFailure(rank, pid, code, "<N/A>") for rank, pid, code in failures},
    )


def test_a_worker_a_signal_ended_is_a_lost_worker_named_with_the_signal(caplog):
    # The agent stops the other worker with SIGTERM once it sees the killed one.
    error = failed((1, 4242, -signal.SIGKILL), (0, 4241, -signal.SIGTERM))
    with caplog.at_level(logging.ERROR):
        assert failure_exit_code(error) == LOST_WORKER == 3
    assert "rank 1 (pid 4242) was ended by SIGKILL, without an error of its own" in caplog.text


@pytest.mark.parametrize("code", [1, 2, 3])
def test_a_worker_that_exited_gives_the_run_its_exit_code(code, caplog):
    assert failure_exit_code(failed((0, 4241, code), (1, 4242, -signal.SIGTERM))) == code
    assert "was ended by" not in caplog.text
