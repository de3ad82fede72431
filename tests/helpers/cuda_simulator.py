"""Test cases run under Numba's CUDA simulator, in a process of their own: the simulator
(``NUMBA_ENABLE_CUDASIM=1``, with ``NUMBA_DISABLE_JIT=1`` so that the kernels' calls of the CPU
kernels' ``@njit`` functions run as Python too) must be chosen before Numba is imported."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from tests.helpers.processes import REPO


def simulated(module: str, out: Path) -> dict[str, np.ndarray]:
    """Run ``python -m module out`` in the simulator and return the arrays it saved to
    ``out`` (an ``.npz``)."""
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1", "NUMBA_DISABLE_JIT": "1"}
    command = [sys.executable, "-m", module, str(out)]
    subprocess.run(command, cwd=REPO, env=env, check=True, timeout=600)
    with np.load(out) as saved:
        return dict(saved)
