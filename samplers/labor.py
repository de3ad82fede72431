"""LABOR (layer-neighbor) sampling over a CSC graph: node-wise fanouts, fewer distinct nodes.

Balin and Catalyurek, "Layer-Neighbor Sampling -- Defusing Neighborhood Explosion in GNNs",
NeurIPS 2023 (arXiv:2210.13339), as DGL implements it (``dgl.sampling.sample_labors``,
``dgl.dataloading.LaborSampler``; kernels in ``src/array/cpu/labor_pick.h``). Each seed
still gets about ``fanout`` in-neighbors, but the seeds of a batch share their random
variates, so that they tend to pick the same neighbors.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from samplers._kernels import labor as kernels
from samplers._kernels import neighbor as neighbor_kernels
from samplers._kernels.random import hop_key
from samplers._kernels.threading import parallel_guard
from samplers.csc import check_csc
from samplers.hop import HopSlots
from samplers.neighbor import MultiHopSampler

_EMPTY_FLOAT = np.empty(0, dtype=np.float64)
_EMPTY_INT = np.empty(0, dtype=np.int64)
_EMPTY_WEIGHT = np.empty(0, dtype=np.float32)


class LaborSampler(MultiHopSampler):
    """LABOR sampling (Poisson variant, DGL's ``LaborSampler``) over one CSC graph.

    At each hop every candidate node ``t`` (an in-neighbor of the frontier) draws one variate
    ``r_t``, uniform on ``[0, 1)``, a pure function of (the batch's seed, the hop, ``t``'s id)
    and shared by every frontier node. Frontier node ``s`` with in-degree ``d_s`` keeps its
    in-edge from ``t`` iff ``r_t <= pi_ts``, where, for fanout ``k``:

    - ``importance_sampling=0`` (LABOR-0): ``pi_ts = min(1, k / d_s)``: each edge is kept
      with the probability uniform sampling gives it, so ``s`` keeps ``min(k, d_s)`` edges on
      average (a random number, not exactly ``k``), and a node with a small ``r_t`` is kept
      by all the seeds it neighbors, which shrinks the batch.
    - ``importance_sampling=i`` (LABOR-i, ``i >= 1``, or ``-1`` for ``LABOR-*``, until the
      expected number of sampled nodes stops falling by 0.01%, as in DGL):
      ``pi_ts = min(1, c_s * pi_t)`` with DGL's fixed-point iterations (see
      :func:`samplers._kernels.labor.importance_probabilities`): ``pi_t`` concentrates the
      picks on fewer candidates while each ``c_s`` keeps the estimator's variance at that of
      uniform sampling of ``k`` (``sum_t 1 / pi_ts = d_s^2 / k``), so ``s`` keeps at least
      ``min(k, d_s)`` edges on average.

    Where ``d_s <= k`` or ``k = -1``, ``s`` keeps all its in-edges; ``k = 0`` keeps none.

    With ``importance_sampling != 0`` the batch carries ``edge_weight`` (float32), DGL's
    ``edge_weights``: for seed ``s`` with ``m_s`` kept edges,
    ``w_ts = (1 / pi_ts) * m_s / sum_{kept t'} (1 / pi_t's)`` (1 where all are kept). They
    sum to ``m_s``, so a *mean* aggregation over the kept edges of ``w_ts * x_t`` gives
    ``sum_kept x_t / pi_ts / sum_kept 1 / pi_ts``, the self-normalized (Hajek) estimate of
    ``s``'s mean over all its in-neighbors (consistent, bias ``O(1 / k)``; the Horvitz-
    Thompson ``sum_kept x_t / pi_ts / d_s`` is the exactly unbiased one). Without
    importance sampling all kept edges of ``s`` have the same ``pi_ts``, the weights would
    all be 1 and ``edge_weight`` is ``None``, as in DGL.

    Args:
        indptr: int64 ``[num_nodes + 1]``, CSC column pointers.
        indices: int32 or int64 ``[num_edges]``, source node of each edge, grouped by
            destination.
        fanouts: expected in-neighbors per node for each hop, ``-1`` for all.
        replace: must be ``False``: LABOR samples without replacement.
        validate: check that ``indptr``/``indices`` form a valid CSC graph.
        num_threads: as in :class:`MultiHopSampler`.
        importance_sampling: ``0`` (LABOR-0), the number of fixed-point iterations
            (LABOR-i), or ``-1`` to iterate to convergence (``LABOR-*``).
        layer_dependency: use the same variates at every hop (the first hop's), as DGL's
            ``layer_dependency=True``: fewer distinct nodes, slightly more correlated layers.

    A seed listed twice gets the same neighbors twice: the variates belong to the
    candidates, not to the seeds. ``edge`` in the output is each edge's CSC position. Calls
    from several threads at once are safe.
    """

    def __init__(
        self,
        indptr: np.ndarray,
        indices: np.ndarray,
        fanouts: Sequence[int],
        replace: bool = False,
        validate: bool = True,
        num_threads: int | None = None,
        *,
        importance_sampling: int = 0,
        layer_dependency: bool = False,
    ):
        if replace:
            raise ValueError(
                f"LaborSampler samples without replacement; 'replace' must be False (got "
                f"{replace!r}): each candidate has one variate per hop and is kept at most once"
            )
        if (
            isinstance(importance_sampling, bool)
            or not isinstance(importance_sampling, (int, np.integer))
            or importance_sampling < -1
        ):
            raise ValueError(
                "'importance_sampling' must be an int >= -1: 0 for none, i >= 1 for i "
                f"fixed-point iterations, -1 until convergence (got {importance_sampling!r})"
            )
        if not isinstance(layer_dependency, (bool, np.bool_)):
            raise TypeError(
                f"'layer_dependency' must be a bool (got {type(layer_dependency).__name__})"
            )
        if validate:
            check_csc(indptr, indices)
        super().__init__(int(indptr.shape[0]) - 1, fanouts, False, num_threads)
        self.indptr = indptr
        self.indices = indices
        self.importance_sampling = int(importance_sampling)
        self.layer_dependency = bool(layer_dependency)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(num_nodes={self.num_nodes}, "
            f"num_edges={self.indices.shape[0]}, fanouts={list(self.fanouts)}, "
            f"importance_sampling={self.importance_sampling}, "
            f"layer_dependency={self.layer_dependency})"
        )

    def hop_key(self, seed: int, hop: int) -> np.uint64:
        """With ``layer_dependency`` every hop draws under the first hop's key, so a candidate
        keeps its variate from hop to hop."""
        return hop_key(seed, 0 if self.layer_dependency else hop)

    def sample_hop(
        self,
        frontier: np.ndarray,
        tagged: np.ndarray,
        fanout: int,
        key: np.uint64,
        slots: HopSlots,
        time_limits: np.ndarray | None = None,
    ) -> np.ndarray:
        """One LABOR hop (see :meth:`MultiHopSampler.sample_hop`). ``tagged`` is unused (the
        variates belong to the candidates); ``time_limits`` must be ``None``."""
        if time_limits is not None:
            raise NotImplementedError(f"{type(self).__name__} does not sample by time")
        return labor_hop(
            self.indptr, self.indices, frontier, fanout, self.importance_sampling, key, slots
        )


def labor_hop(
    indptr: np.ndarray,
    indices: np.ndarray,
    frontier: np.ndarray,
    fanout: int,
    importance_sampling: int,
    key: np.uint64,
    slots: HopSlots,
) -> np.ndarray:
    """One LABOR hop for ``frontier`` (int64 global ids, each below ``len(indptr) - 1``):
    fills what ``slots.reserve`` returns, ``slots.columns()`` and, when
    ``importance_sampling != 0``, ``slots.weights()``, under the hop's ``key`` (uint64).

    Returns:
        int64 ``[n + 1]``: frontier node ``i``'s kept edges are the slots
        ``offsets[i]:offsets[i + 1]``, in CSC order.
    """
    n = frontier.shape[0]
    weighted = importance_sampling != 0
    c = np.zeros(n, dtype=np.float64)
    if fanout == 0:
        slots.reserve(0)
        if weighted:
            slots.weights()
        return np.zeros(n + 1, dtype=np.int64)
    guard = parallel_guard()
    starts = np.empty(n, dtype=np.int64)
    degrees = np.empty(n, dtype=np.int64)
    with guard:
        # Every in-edge is a candidate: node i's lie at ranges[i]:ranges[i + 1] of them all.
        ranges = neighbor_kernels.hop_offsets(indptr, frontier, -1, False, starts, degrees)
    pi, cand = _EMPTY_FLOAT, _EMPTY_INT
    if fanout > 0:
        np.divide(fanout, degrees, out=c, where=degrees > 0)
        if weighted and np.any(degrees > fanout):
            cand, group_ptr, group_rows = _candidates(indices, starts, ranges, indptr.shape[0] - 1)
            with guard:
                pi = kernels.importance_probabilities(
                    degrees, ranges, cand, group_ptr, group_rows, fanout, importance_sampling, c
                )
    with guard:
        offsets = kernels.keep_counts(indices, starts, degrees, ranges, fanout, key, c, pi, cand)
    neighbors, edges = slots.reserve(int(offsets[-1]))
    columns = slots.columns()
    weights = slots.weights() if weighted else _EMPTY_WEIGHT
    with guard:
        kernels.keep_fill(
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
            slots.first_local,
            neighbors,
            edges,
            columns,
            weights,
        )
    return offsets


def _candidates(
    indices: np.ndarray, starts: np.ndarray, ranges: np.ndarray, num_nodes: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`samplers._kernels.labor.candidate_groups` with a table sized for the most
    candidates there can be (``min(E, num_nodes)``), at most half full."""
    bound = max(1, min(int(ranges[-1]), num_nodes))
    bits = int(2 * bound - 1).bit_length()
    dtype = np.int32 if num_nodes <= np.iinfo(np.int32).max else np.int64
    table = np.full(2 << bits, kernels.EMPTY, dtype=dtype)
    return kernels.candidate_groups(indices, starts, ranges, table, 64 - bits)
