"""Counter-based random numbers for Numba kernels.

Every random draw is a pure function of ``(seed, hop, destination node)`` and a
draw counter, so a batch is the same whatever the number of threads and
whatever order the threads run in. The generator is SplitMix64 (Steele, Lea and
Flood, OOPSLA 2014); integers below a bound use Lemire's multiply-shift with
rejection (ACM TOMACS 2019), which is exactly uniform.
"""

import numpy as np
from numba import njit

from samplers.seeds import mix_seed

GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_LOW32 = np.uint64(0xFFFFFFFF)
_TWO32 = np.uint64(1 << 32)
MAX_BOUND = 1 << 32


@njit(inline="always")
def mix64(z):
    """SplitMix64's finalizer: a bijection of uint64 with full avalanche."""
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


@njit(inline="always")
def stream_state(key, counter):
    """The start state of the stream numbered ``counter`` under ``key`` (uint64 each)."""
    return mix64(key ^ (counter * GOLDEN))


@njit(inline="always")
def uniform_below(state, bound):
    """An integer uniform on ``[0, bound)`` and the advanced state.

    ``bound`` is a uint64 in ``[1, 2**32]``; ``state`` is a uint64.
    """
    state += GOLDEN
    product = (mix64(state) >> np.uint64(32)) * bound
    low = product & _LOW32
    if low < bound:
        threshold = (_TWO32 - bound) % bound
        while low < threshold:
            state += GOLDEN
            product = (mix64(state) >> np.uint64(32)) * bound
            low = product & _LOW32
    return product >> np.uint64(32), state


def hop_key(seed: int, hop: int) -> np.uint64:
    """The stream key of one hop of one batch: a uint64 mixed from ``seed`` and ``hop``."""
    return np.uint64(mix_seed(seed, hop))
