"""Numba kernels of LABOR (layer-neighbor) sampling over a CSC graph.

LABOR (Balin and Catalyurek, NeurIPS 2023, arXiv:2210.13339) as DGL's CPU
``CSRLaborPick`` (``src/array/cpu/labor_pick.h``) runs it: every candidate node ``t``
(an in-neighbor of some frontier node) gets one variate ``r_t``, uniform on ``[0, 1)`` and
shared by all frontier nodes of the hop; frontier node ``s`` keeps its in-edge from ``t``
iff ``r_t <= min(1, c_s * pi_t)``. Without importance sampling ``pi_t = 1`` and
``c_s = k / d_s`` (fanout ``k``, in-degree ``d_s``); with it, :func:`importance_probabilities`
runs DGL's fixed-point iterations for ``pi_t`` and ``c_s``.

``r_t`` is a pure function of (the hop's key, ``t``'s id), so a hop's sample depends on
neither the thread count nor the frontier's order. Arrays only: ``indptr`` int64
``[num_nodes + 1]``, ``indices`` int32 or int64 ``[num_edges]``, node ids int64. Callers
validate; the kernels trust their input.
"""

import numpy as np
from numba import njit, prange

from samplers._kernels.prefetch import prefetch
from samplers._kernels.random import GOLDEN, mix64, stream_state

# How many frontier nodes ahead the kernels prefetch their ``indptr`` entries or rows.
PREFETCH_DISTANCE = 16
EMPTY = -1
# DGL's tolerance (``eps`` in labor_pick.h): the fixed point for ``c_s`` stops once the
# variance and its target agree within it, and the iterations for ``pi`` stop (when asked to
# run to convergence) once the expected number of sampled nodes falls by less than it.
EPS = 1e-4
# Guards against an endless loop; DGL has none. The fixed point for ``c_s`` converges
# geometrically (rate at most k / d_s), the outer iterations in a handful of steps.
MAX_FIXED_POINT_STEPS = 100_000
MAX_ITERATIONS = 1000
_UNIT = 1.0 / (1 << 53)


@njit(inline="always")
def variate(key, node):
    """``r_t``: a float64 uniform on ``[0, 1)`` (53 random bits), a pure function of ``key``
    (uint64, one per batch and hop) and ``node`` (the candidate's id, any int)."""
    state = stream_state(key, np.uint64(node)) + GOLDEN
    return np.float64(mix64(state) >> np.uint64(11)) * _UNIT


@njit(nogil=True, cache=True)
def candidate_groups(indices, starts, ranges, table, shift):
    """Number the distinct in-neighbors of the frontier (the candidates) ``0 .. C - 1`` in
    order of first appearance, with an open-addressing hash table (sequential, so that the
    numbering does not depend on the threads).

    ``table`` is ``[2 * capacity]`` (key, value) pairs, int32 when node ids fit else int64,
    all ``EMPTY``, ``capacity`` a power of two above the number of candidates (at most half
    full keeps probing short) and ``shift = 64 - log2(capacity)``.

    Returns:
        ``(cand, group_ptr, group_rows)``: int64 ``[E]`` (``E = ranges[-1]``), the candidate
        of each in-edge in the order of ``ranges``; int64 ``[C + 1]`` and int64 ``[E]``: the
        frontier positions of candidate ``t``'s out-neighbors are
        ``group_rows[group_ptr[t]:group_ptr[t + 1]]``, ascending.
    """
    n = starts.shape[0]
    num_edges = ranges[n]
    mask = table.shape[0] // 2 - 1
    cand = np.empty(num_edges, dtype=np.int64)
    num_cand = 0
    for i in range(n):
        start = starts[i]
        lo = ranges[i]
        if i + PREFETCH_DISTANCE < n:
            prefetch(indices, starts[i + PREFETCH_DISTANCE])
        for j in range(ranges[i + 1] - lo):
            node = indices[start + j]
            s = np.int64((np.uint64(node) * GOLDEN) >> np.uint64(shift))
            while True:
                key = table[2 * s]
                if key == node:
                    cand[lo + j] = table[2 * s + 1]
                    break
                if key == EMPTY:
                    table[2 * s] = node
                    table[2 * s + 1] = num_cand
                    cand[lo + j] = num_cand
                    num_cand += 1
                    break
                s = (s + 1) & mask
    group_ptr = np.zeros(num_cand + 1, dtype=np.int64)
    for e in range(num_edges):
        group_ptr[cand[e] + 1] += 1
    for t in range(num_cand):
        group_ptr[t + 1] += group_ptr[t]
    fill = group_ptr[:-1].copy()
    group_rows = np.empty(num_edges, dtype=np.int64)
    for i in range(n):
        for e in range(ranges[i], ranges[i + 1]):
            group_rows[fill[cand[e]]] = i
            fill[cand[e]] += 1
    return cand, group_ptr, group_rows


@njit(parallel=True, nogil=True, cache=True)
def importance_probabilities(degrees, ranges, cand, group_ptr, group_rows, fanout, iterations, c):
    """DGL's ``compute_importance_sampling_probabilities`` (unweighted graph).

    Args:
        degrees: int64 ``[n]``, each frontier node's in-degree ``d_s``.
        ranges: int64 ``[n + 1]``, the cumulative in-degrees (``hop_offsets`` with fanout
            -1, :mod:`samplers._kernels.neighbor`).
        cand: int64 ``[ranges[-1]]``, the candidate (index in ``[0, C)``) of each in-edge,
            in the order of ``ranges``.
        group_ptr: int64 ``[C + 1]``; ``group_rows[group_ptr[t]:group_ptr[t + 1]]`` (int64)
            are the frontier positions of candidate ``t``'s out-neighbors.
        fanout: ``k >= 1``.
        iterations: how many iterations (``>= 1``), or ``-1`` to run until the expected
            number of sampled nodes stops falling (at most ``MAX_ITERATIONS``).
        c: float64 ``[n]``, in: ``k / d_s`` (any value where ``d_s = 0``); out: ``c_s``.

    Returns:
        float64 ``[C]``: ``pi_t``. Each iteration sets ``pi_t *= max_{s: t -> s} c_s`` (the
        first sets ``pi_t = max_s c_s``; Eq. 18 of arXiv:2210.13339 as DGL's comments cite
        it), then solves ``sum_{t -> s} 1 / min(1, c_s pi_t) = d_s^2 / k`` (the variance of
        uniform sampling of ``k`` of ``d_s``; DGL cites Eqs. 15 and 22) for each ``s`` with
        ``d_s > k`` by DGL's fixed point ``c_s <- c_s * lhs / rhs``, stopped once they agree
        within ``EPS``; then stops early if ``sum_t min(1, pi_t)`` fell by less than
        ``EPS`` (relative). Where ``d_s <= k`` the solution is any
        ``c_s >= 1 / min_t pi_t`` (every edge kept); this takes ``max(c_s, 1 / min_t pi_t)``,
        the limit of DGL's iteration (which stops within ``EPS`` of it), in one step.
    """
    n = degrees.shape[0]
    num_cand = group_ptr.shape[0] - 1
    pi = np.empty(num_cand, dtype=np.float64)
    max_degree = 1
    for i in range(n):
        max_degree = max(max_degree, degrees[i])
    prev = np.float64(max_degree) * n
    it = 0
    while it < iterations or (iterations < 0 and it < MAX_ITERATIONS):
        for t in prange(num_cand):
            largest = 0.0
            for q in range(group_ptr[t], group_ptr[t + 1]):
                largest = max(largest, c[group_rows[q]])
            if it == 0:
                pi[t] = largest
            else:
                pi[t] *= largest
        for i in prange(n):
            d = degrees[i]
            lo = ranges[i]
            if d == 0:
                pass
            elif d <= fanout:
                smallest = np.inf
                for e in range(lo, lo + d):
                    smallest = min(smallest, pi[cand[e]])
                c[i] = max(c[i], 1.0 / smallest)
            else:
                target = np.float64(d) * d / fanout
                ci = c[i]
                for _ in range(MAX_FIXED_POINT_STEPS):
                    var = 0.0
                    for e in range(lo, lo + d):
                        var += 1.0 / min(1.0, ci * pi[cand[e]])
                    ci *= var / target
                    if min(var, target) / max(var, target) >= 1.0 - EPS:
                        break
                c[i] = ci
        it += 1
        # Sequential, so that the sum (and the decision) does not depend on the threads.
        expected = 0.0
        for t in range(num_cand):
            expected += min(1.0, pi[t])
        if expected / prev >= 1.0 - EPS:
            break
        prev = expected
    return pi


@njit(inline="always")
def _keep_all(degree, fanout):
    return fanout < 0 or degree <= fanout


@njit(parallel=True, nogil=True, cache=True)
def keep_counts(indices, starts, degrees, ranges, fanout, key, c, pi, cand):
    """How many in-edges each frontier node keeps: int64 ``[n + 1]``, cumulative (node
    ``i``'s kept edges go to ``offsets[i]:offsets[i + 1]``).

    Node ``s`` keeps all its in-edges when ``fanout < 0`` or ``d_s <= fanout``, else the edge
    from ``t`` iff ``r_t <= min(1, c[s] * pi[cand[e]])`` (``pi`` float64 ``[C]`` and ``cand``
    int64 ``[ranges[-1]]`` from importance sampling; empty ``pi``: ``pi_t = 1``). ``c`` is
    float64 ``[n]``, ``key`` uint64.
    """
    n = starts.shape[0]
    with_pi = pi.shape[0] > 0
    counts = np.empty(n + 1, dtype=np.int64)
    counts[0] = 0
    for i in prange(n):
        if i + PREFETCH_DISTANCE < n:
            prefetch(indices, starts[i + PREFETCH_DISTANCE])
        d = degrees[i]
        if _keep_all(d, fanout):
            counts[i + 1] = d
        else:
            start = starts[i]
            lo = ranges[i]
            ci = c[i]
            kept = 0
            for j in range(d):
                p = ci * pi[cand[lo + j]] if with_pi else ci
                if variate(key, indices[start + j]) <= min(1.0, p):
                    kept += 1
            counts[i + 1] = kept
    return np.cumsum(counts)


@njit(parallel=True, nogil=True, cache=True)
def keep_fill(
    indices,
    starts,
    degrees,
    ranges,
    fanout,
    key,
    c,
    pi,
    cand,
    offsets,
    first_local,
    out_nbr,
    out_edge,
    out_col,
    out_weight,
):
    """Write the edges :func:`keep_counts` counted (same arguments; ``offsets`` its output).

    Node ``i``'s kept edges, in CSC order, fill ``offsets[i]:offsets[i + 1]`` of ``out_nbr``
    (the neighbor's id as ``indices`` holds it), ``out_edge`` (the edge's CSC position) and
    ``out_col`` (``first_local + i``), int64 each. Unless ``out_weight`` (float32) is empty,
    it gets DGL's importance-sampling weights: with ``p_e = min(1, c_s pi_t)`` and ``m_s``
    kept edges, ``w_e = (1 / p_e) * m_s / sum_{kept e'} (1 / p_e')``, so that
    ``mean_{kept e} w_e x_t`` is the self-normalized (Hajek) estimate of the mean of ``x``
    over all of ``s``'s in-neighbors; ``w_e = 1`` where all in-edges are kept.
    """
    n = starts.shape[0]
    with_pi = pi.shape[0] > 0
    with_weight = out_weight.shape[0] > 0
    for i in prange(n):
        if i + PREFETCH_DISTANCE < n:
            prefetch(indices, starts[i + PREFETCH_DISTANCE])
        d = degrees[i]
        start = starts[i]
        pos = offsets[i]
        col = first_local + i
        if _keep_all(d, fanout):
            for j in range(d):
                out_nbr[pos + j] = indices[start + j]
                out_edge[pos + j] = start + j
                out_col[pos + j] = col
                if with_weight:
                    out_weight[pos + j] = 1.0
        else:
            lo = ranges[i]
            end = offsets[i + 1]
            ci = c[i]
            total = 0.0
            # Branch-free: each edge is written at ``pos``, which moves on only if it is
            # kept (a coin flip the CPU cannot predict); the next edge overwrites a dropped
            # one. The slot past this node's last belongs to the next node: never written.
            for j in range(d):
                if pos == end:
                    break
                t = indices[start + j]
                p = min(1.0, ci * pi[cand[lo + j]] if with_pi else ci)
                out_nbr[pos] = t
                out_edge[pos] = start + j
                out_col[pos] = col
                keep = variate(key, t) <= p
                if with_weight:
                    out_weight[pos] = 1.0 / p
                    total += keep / p
                pos += keep
            if with_weight and pos > offsets[i]:
                scale = (pos - offsets[i]) / total
                for q in range(offsets[i], pos):
                    out_weight[q] = np.float64(out_weight[q]) * scale
