"""Numba kernel of uniform random walks over a CSR graph (out-neighbors).

Arrays only; callers validate. Walk ``i`` draws from the counter-based stream numbered ``i``
under ``key`` (:mod:`samplers._kernels.random`), so walks do not depend on the threads.
"""

import numpy as np
from numba import njit, prange

from samplers._kernels.random import GOLDEN, stream_state, uniform_below


@njit(parallel=True, nogil=True, cache=True)
def random_walks(indptr, indices, start, walk_length, key, out):
    """Fill ``out`` (int64 ``[len(start), walk_length + 1]``) with walks from ``start`` (int64):
    each step moves to an out-neighbor chosen uniformly (``indices[indptr[v]:indptr[v + 1]]``);
    a node without out-neighbors stays where it is, as torch_cluster's walks do."""
    for i in prange(start.shape[0]):
        state = stream_state(key, np.uint64(i) + GOLDEN)
        v = start[i]
        out[i, 0] = v
        for step in range(1, walk_length + 1):
            lo = indptr[v]
            degree = indptr[v + 1] - lo
            if degree > 0:
                t, state = uniform_below(state, np.uint64(degree))
                v = indices[lo + np.int64(t)]
            out[i, step] = v
