"""Starting the worker scripts and ``graphengine train`` in several processes, and killing one."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
WORKERS = Path(__file__).resolve().parent / "workers"


def torchrun(nproc: int, *args, timeout=240) -> subprocess.CompletedProcess:
    """Run ``args`` (a script and its arguments) under torchrun with ``nproc`` processes, from
    the repository root with it on ``PYTHONPATH``."""
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={nproc}",
        *map(str, args),
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        command, capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO
    )


def train_command(root, epochs, *extra) -> list[str]:
    """``graphengine train`` with 2 workers on synthetic-small under ``root``."""
    return [
        sys.executable,
        "-m",
        "graphengine",
        "train",
        "--nproc",
        "2",
        "--epochs",
        str(epochs),
        "--root",
        str(root),
        "--fanouts",
        "5,5",
        "--batch-size",
        "256",
        "--no-progress",
        *map(str, extra),
    ]


def assert_killing_rank_1_stops_the_run(command: list[str], metrics: Path) -> None:
    """Start ``command`` (a 2-worker ``graphengine train`` with ``--dist-timeout 20`` writing
    ``metrics``), kill rank 1 once an epoch is done, and check that the run fails within a
    minute with exit code 3 (a lost worker), the launcher and torchrun naming rank 1 and
    the signal."""
    launcher = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO
    )
    try:
        wait_until_trained(launcher, metrics, lambda: launcher.stderr.read())
        victim = workers(launcher.pid)["1"]
        killed_at = time.monotonic()
        os.kill(victim, signal.SIGKILL)
        _, stderr = launcher.communicate(timeout=90)
    finally:
        if launcher.poll() is None:
            launcher.kill()
    assert time.monotonic() - killed_at < 60
    assert launcher.returncode == 3, (launcher.returncode, stderr[-3000:])
    assert f"rank 1 (pid {victim}) was ended by SIGKILL" in stderr, stderr[-3000:]
    assert "rank      : 1" in stderr or "rank: 1" in stderr, stderr[-3000:]


def wait_until_trained(launcher: subprocess.Popen, metrics: Path, stderr, timeout=180) -> None:
    """Wait until the training ``launcher`` started has written a line to ``metrics`` (an
    epoch is done); fails quoting ``stderr()`` should it end first, or after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not (metrics.exists() and metrics.read_text().strip()):
        assert launcher.poll() is None, stderr()[-3000:]
        assert time.monotonic() < deadline, "training did not start"
        time.sleep(0.5)


def workers(pid: int) -> dict[str, int]:
    """The torchrun workers under process ``pid``, by their ``RANK``."""
    ranks = {environment(child).get("RANK"): child for child in descendants(pid)}
    ranks.pop(None, None)
    return ranks


def descendants(pid: int) -> list[int]:
    """The processes under ``pid``, children first."""
    out = []
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        out += [int(child), *descendants(int(child))]
    return out


def environment(pid: int) -> dict:
    """Process ``pid``'s environment (empty when it cannot be read)."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    return dict(
        item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item
    )
