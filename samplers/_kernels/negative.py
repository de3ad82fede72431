"""Numba kernels that draw negative edges for link prediction.

Arrays only; callers validate. Entry ``i`` draws from the counter-based stream numbered ``i``
under ``key`` (:mod:`samplers._kernels.random`), so the draws do not depend on the threads.
A node is uniform over a side's ``num_nodes`` nodes or, when the side's ``order`` is not empty,
over the nodes no later than the entry's time limit: ``order`` (int64) lists the side's nodes by
ascending time and ``sorted_times`` (int64) their times, so the nodes allowed are a prefix of
``order``, found by binary search. A side with node weights (``cumulative``: float64 running
sums of the weights over ``order``, or over the ids when ``order`` is empty; empty for none)
draws a node in proportion to its weight, by inverse transform over the allowed prefix. A
pair whose key ``source * num_dst + destination`` is in ``edge_keys`` (sorted int64, empty for
none) is redrawn, at most ``max_draws`` draws in all; an entry that finds no allowed pair gets
``-1``. Rejection keeps each draw's law over the allowed pairs that are not edges, renormalized.
"""

import numpy as np
from numba import njit, prange

from samplers._kernels.random import stream_state, uniform_below
from samplers._kernels.ranges import first_after
from samplers._kernels.weighted import _unit, first_passing


@njit(inline="always")
def _allowed(num_nodes, sorted_times, limits, i):
    """How many nodes of a side entry ``i`` may draw: all, or those no later than its limit."""
    if sorted_times.shape[0] == 0:
        return num_nodes
    return first_after(sorted_times, 0, sorted_times.shape[0], limits[i])


@njit(inline="always")
def _node(state, allowed, order, cumulative):
    """A node of the ``allowed`` first of ``order`` (of ``[0, allowed)`` when ``order`` is
    empty): uniform, or with ``cumulative`` in proportion to its weight; and the advanced
    state. ``-1`` when the allowed nodes weigh nothing."""
    if cumulative.shape[0] == 0:
        t, state = uniform_below(state, np.uint64(allowed))
        position = np.int64(t)
    else:
        if allowed == 0 or cumulative[allowed - 1] <= 0.0:
            return np.int64(-1), state
        u, state = _unit(state)
        lo = first_passing(cumulative, 0, allowed - 1, u * cumulative[allowed - 1])
        # A target rounded up onto the total lands past the last node of positive weight.
        while lo > 0 and cumulative[lo] == cumulative[lo - 1]:
            lo -= 1
        position = lo
    if order.shape[0] == 0:
        return position, state
    return order[position], state


@njit(inline="always")
def _is_edge(edge_keys, pair):
    """Whether ``pair`` is in ``edge_keys`` (sorted int64; empty: never)."""
    lo = 0
    hi = edge_keys.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        if edge_keys[mid] < pair:
            lo = mid + 1
        else:
            hi = mid
    return lo < edge_keys.shape[0] and edge_keys[lo] == pair


@njit(parallel=True, nogil=True, cache=True)
def draw_pairs(
    num_src,
    src_order,
    src_times,
    src_cumulative,
    num_dst,
    dst_order,
    dst_times,
    dst_cumulative,
    limits,
    edge_keys,
    max_draws,
    key,
    out_src,
    out_dst,
):
    """Fill ``out_src``/``out_dst`` (int64 ``[count]``) with pairs, each end drawn among its
    side's allowed nodes (``limits``: int64 ``[count]`` time limits, read for a side with
    times), uniformly or by weight, pairs in ``edge_keys`` redrawn; ``-1`` in both where
    ``max_draws`` draws found none."""
    for i in prange(out_src.shape[0]):
        state = stream_state(key, np.uint64(i))
        src_allowed = _allowed(num_src, src_times, limits, i)
        dst_allowed = _allowed(num_dst, dst_times, limits, i)
        out_src[i] = -1
        out_dst[i] = -1
        for _ in range(max_draws):
            src, state = _node(state, src_allowed, src_order, src_cumulative)
            dst, state = _node(state, dst_allowed, dst_order, dst_cumulative)
            if src < 0 or dst < 0:
                break
            if not _is_edge(edge_keys, src * num_dst + dst):
                out_src[i] = src
                out_dst[i] = dst
                break


@njit(parallel=True, nogil=True, cache=True)
def draw_destinations(
    sources, num_dst, dst_order, dst_times, dst_cumulative, limits, edge_keys, max_draws, key, out
):
    """Fill ``out`` (int64 ``[len(sources)]``) with a destination for each of ``sources``
    (int64), drawn among the allowed nodes (``limits`` as in :func:`draw_pairs`), uniformly
    or by weight, a destination that makes a pair in ``edge_keys`` redrawn; ``-1`` where
    ``max_draws`` draws found none."""
    for i in prange(sources.shape[0]):
        state = stream_state(key, np.uint64(i))
        allowed = _allowed(num_dst, dst_times, limits, i)
        base = sources[i] * num_dst
        out[i] = -1
        for _ in range(max_draws):
            dst, state = _node(state, allowed, dst_order, dst_cumulative)
            if dst < 0:
                break
            if not _is_edge(edge_keys, base + dst):
                out[i] = dst
                break
