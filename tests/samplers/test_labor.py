"""LABOR sampling (samplers.labor) against independent references on small random graphs.

The reference for the inclusion probabilities, :func:`reference_probabilities`, is a literal
pure-Python transcription of DGL's ``compute_importance_sampling_probabilities`` and
``CSRLaborPick`` (``src/array/cpu/labor_pick.h``), with DGL's inner fixed point run to
convergence (``inner_eps``) instead of to DGL's 1e-4, so that it is the limit both
implementations approximate. Statistical checks use fixed seeds: they are deterministic,
with thresholds far from what a correct sampler gives and far below what a wrong ``pi``
gives.
"""

from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np
import pytest
from scipy.stats import chi2

from samplers import NeighborSampler, SamplerInput
from samplers.labor import LaborSampler
from tests.helpers.graphs import random_csc

IMPORTANCE = [
    pytest.param(0, id="labor-0"),
    pytest.param(1, id="labor-1"),
    pytest.param(3, id="labor-3"),
    pytest.param(-1, id="labor-star"),
]
# A dense small graph: 60 nodes of in-degree about 15, so that the seeds' in-neighborhoods
# overlap a lot and importance sampling moves the probabilities well away from k / d.
SMALL = (60, 900, 3)


def batch(sampler, seeds, seed):
    seeds = np.asarray(seeds, dtype=np.int64)
    return sampler.sample_from_nodes(SamplerInput(seeds, np.arange(seeds.size), seed))


def reference_probabilities(indptr, indices, rows, fanout, iterations, inner_eps=1e-11):
    """DGL's LABOR inclusion probabilities ``pi_ts``, one float64 array per row of ``rows``
    (over its in-edges, CSC order), by plain Python dicts and loops."""
    rows = [int(r) for r in rows]
    deg = [int(indptr[r + 1] - indptr[r]) for r in rows]
    nbrs = [[int(t) for t in indices[indptr[r] : indptr[r + 1]]] for r in rows]
    if fanout < 0:
        return [np.ones(d) for d in deg]
    if fanout == 0:
        return [np.zeros(d) for d in deg]
    cs = [fanout / d if d else np.inf for d in deg]
    if iterations == 0:
        return [np.full(d, min(1.0, cs[i])) for i, d in enumerate(deg)]
    pi = {}
    prev = max([1, *deg]) * len(rows)
    it = 0
    while it < iterations or iterations < 0:
        largest = {}
        for i in range(len(rows)):
            for t in nbrs[i]:
                largest[t] = max(largest.get(t, -np.inf), cs[i])
        if not pi:
            pi = largest
        else:
            for t, v in largest.items():
                pi[t] *= v
        for i, d in enumerate(deg):
            if d == 0:
                continue
            target = d * d / min(fanout, d)
            c = cs[i]
            for _ in range(10**6):
                var = sum(1.0 / min(1.0, c * pi[t]) for t in nbrs[i])
                c *= var / target
                if min(var, target) / max(var, target) >= 1 - inner_eps:
                    break
            cs[i] = c
        it += 1
        expected = sum(min(1.0, v) for v in pi.values())
        if expected / prev >= 1 - 1e-4:
            break
        prev = expected
    return [np.array([min(1.0, cs[i] * pi[t]) for t in nbrs[i]]) for i in range(len(rows))]


def seed_edges(indptr, seeds):
    """The CSC positions of the seeds' in-edges (int64), seed by seed, and each one's seed
    position."""
    pos = np.concatenate([np.arange(indptr[s], indptr[s + 1]) for s in seeds])
    owner = np.repeat(np.arange(len(seeds)), np.diff(indptr)[seeds])
    return pos, owner


def kept_edges(out, num_edges):
    """Whether each CSC position was sampled in the first hop (bool ``[num_edges]``)."""
    first = out.edge[: out.num_sampled_edges[0]]
    kept = np.zeros(num_edges, dtype=bool)
    kept[first] = True
    return kept


def small_graph():
    indptr, indices = random_csc(*SMALL)
    seeds = np.random.default_rng(0).choice(SMALL[0], 20, replace=False)
    return indptr, indices, seeds


@pytest.mark.parametrize("importance_sampling", IMPORTANCE)
def test_inclusion_frequencies_match_reference(importance_sampling):
    indptr, indices, seeds = small_graph()
    fanout, num_batches = 4, 3000
    sampler = LaborSampler(indptr, indices, [fanout], importance_sampling=importance_sampling)
    pos, _ = seed_edges(indptr, seeds)
    p = np.concatenate(reference_probabilities(indptr, indices, seeds, fanout, importance_sampling))
    hits = np.zeros(indices.shape[0])
    for b in range(num_batches):
        hits += kept_edges(batch(sampler, seeds, b), indices.shape[0])
    freq = hits[pos] / num_batches

    certain = p >= 1
    assert np.all(freq[certain] == 1)
    z = (freq[~certain] - p[~certain]) / np.sqrt(p[~certain] * (1 - p[~certain]) / num_batches)
    assert np.abs(z).max() < 5.5
    # The edges of one candidate share its variate, so only one edge per candidate enters
    # the chi-square test: the others are dependent on it.
    _, first = np.unique(indices[pos][~certain], return_index=True)
    statistic = float((z[first] ** 2).sum())
    assert chi2.sf(statistic, first.size) > 1e-4, (statistic, first.size)
    if importance_sampling != 0:  # the probabilities really moved away from k / d
        uniform = np.concatenate(reference_probabilities(indptr, indices, seeds, fanout, 0))
        assert np.abs(p - uniform).max() > 0.1


@pytest.mark.parametrize("importance_sampling", IMPORTANCE)
def test_shared_variates_make_inclusion_monotone(importance_sampling):
    """One variate per candidate: kept for ``s1`` and ``pi_ts2 >= pi_ts1`` means kept for
    ``s2``; uniform per-seed sampling breaks this."""
    indptr, indices, seeds = small_graph()
    fanout = 4
    pos, owner = seed_edges(indptr, seeds)
    p = np.concatenate(reference_probabilities(indptr, indices, seeds, fanout, importance_sampling))
    src = indices[pos]
    # Pairs of in-edges from one candidate to two seeds, with pi(a) + margin <= pi(b): the
    # margin covers DGL's 1e-4 tolerance, which the sampler keeps and the reference does not.
    a, b = np.nonzero((src[:, None] == src[None, :]) & (owner[:, None] != owner[None, :]))
    margin = 0.0 if importance_sampling == 0 else 1e-3
    ordered = p[a] + margin <= p[b]
    a, b = a[ordered], b[ordered]
    assert a.size > 100

    def violations(out):
        kept = kept_edges(out, indices.shape[0])[pos]
        return int(np.count_nonzero(kept[a] & ~kept[b]))

    labor = LaborSampler(indptr, indices, [fanout], importance_sampling=importance_sampling)
    uniform = NeighborSampler(indptr, indices, [fanout])
    for b_seed in range(20):
        assert violations(batch(labor, seeds, b_seed)) == 0
    assert sum(violations(batch(uniform, seeds, b_seed)) for b_seed in range(20)) > 0


@pytest.mark.parametrize("importance_sampling", IMPORTANCE)
def test_expected_edges_per_seed(importance_sampling):
    """Each seed keeps ``sum_t pi_ts`` edges on average: ``min(k, d_s)`` for LABOR-0, at least
    that with importance sampling (Cauchy-Schwarz, since ``sum_t 1 / pi_ts = d_s^2 / k``)."""
    indptr, indices, seeds = small_graph()
    fanout, num_batches = 4, 2000
    sampler = LaborSampler(indptr, indices, [fanout], importance_sampling=importance_sampling)
    ps = reference_probabilities(indptr, indices, seeds, fanout, importance_sampling)
    expected = np.array([q.sum() for q in ps])
    variance = np.array([(q * (1 - q)).sum() for q in ps])
    degrees = np.diff(indptr)[seeds]
    floor = np.minimum(fanout, degrees)
    if importance_sampling == 0:
        np.testing.assert_allclose(expected, floor)
    else:
        assert np.all(expected >= floor - 1e-9)
        assert expected.mean() < 1.5 * fanout

    counts = np.zeros(len(seeds))
    for b in range(num_batches):
        out = batch(sampler, seeds, 10_000 + b)
        counts += np.bincount(out.col, minlength=len(seeds))
    mean = counts / num_batches
    random = variance > 0
    z = (mean[random] - expected[random]) / np.sqrt(variance[random] / num_batches)
    assert np.abs(z).max() < 5.5
    assert np.all(mean[~random] == expected[~random])
    assert abs(mean.mean() - fanout) < 0.5 * fanout


def test_fewer_distinct_nodes_than_uniform():
    """On a graph where neighborhoods overlap, LABOR samples far fewer distinct nodes than
    uniform sampling at the same fanouts, importance sampling and layer dependency fewer
    still, while the number of edges stays within uniform's."""
    indptr, indices = random_csc(1000, 30000, 5)
    seeds = np.random.default_rng(1).choice(1000, 100, replace=False)
    fanouts = [5, 5]

    def mean_size(sampler):
        outs = [batch(sampler, seeds, b) for b in range(10)]
        return np.mean([o.node.size for o in outs]), np.mean([o.row.size for o in outs])

    uniform_nodes, uniform_edges = mean_size(NeighborSampler(indptr, indices, fanouts))
    labor0, labor0_edges = mean_size(LaborSampler(indptr, indices, fanouts))
    labor_star, _ = mean_size(LaborSampler(indptr, indices, fanouts, importance_sampling=-1))
    dependent, _ = mean_size(LaborSampler(indptr, indices, fanouts, layer_dependency=True))
    assert labor0 < 0.7 * uniform_nodes
    assert labor_star < labor0
    assert dependent < 0.85 * labor0
    # LABOR-0 keeps k / d of each seed's edges on average; fewer nodes, so fewer hop-2 seeds.
    assert labor0_edges < uniform_edges


@pytest.mark.parametrize(
    "options",
    [
        pytest.param({}, id="labor-0"),
        pytest.param({"importance_sampling": 2}, id="labor-2"),
        pytest.param({"importance_sampling": -1}, id="labor-star"),
        pytest.param({"importance_sampling": -1, "layer_dependency": True}, id="dependent"),
    ],
)
def test_deterministic_whatever_the_threads(options):
    indptr, indices = random_csc(5000, 100_000, 11, np.int64)
    seeds = np.random.default_rng(2).choice(5000, 500, replace=False)
    sampler = LaborSampler(indptr, indices, [10, 5, 3], **options)
    previous = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = batch(sampler, seeds, 42)
        numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
        two = batch(sampler, seeds, 42)
    finally:
        numba.set_num_threads(previous)
    other = batch(sampler, seeds, 43)
    for name in ("node", "row", "col", "edge", "edge_weight"):
        a, b = getattr(one, name), getattr(two, name)
        assert (a is None and b is None) or np.array_equal(a, b), name
    assert one.num_sampled_nodes == two.num_sampled_nodes
    assert one.num_sampled_edges == two.num_sampled_edges
    assert not np.array_equal(one.edge, other.edge[: one.edge.size])


@pytest.mark.parametrize("importance_sampling", [0, 2, -1])
def test_sample_does_not_depend_on_frontier_order(importance_sampling):
    indptr, indices, seeds = small_graph()
    sampler = LaborSampler(indptr, indices, [4], importance_sampling=importance_sampling)
    order = np.random.default_rng(5).permutation(len(seeds))
    a, b = batch(sampler, seeds, 9), batch(sampler, seeds[order], 9)
    for i, s in enumerate(seeds):
        j = int(np.flatnonzero(seeds[order] == s)[0])
        np.testing.assert_array_equal(a.edge[a.col == i], b.edge[b.col == j])
        if importance_sampling:
            np.testing.assert_allclose(
                a.edge_weight[a.col == i], b.edge_weight[b.col == j], rtol=1e-6
            )


@pytest.mark.parametrize("importance_sampling", [1, 3, -1])
def test_weights_are_dgl_normalized_inverse_probabilities(importance_sampling):
    """Within a seed, ``w_ts`` is proportional to ``1 / pi_ts`` and sums to the number of
    kept edges (DGL's ``edge_weights``, meant for a mean aggregation)."""
    indptr, indices, seeds = small_graph()
    sampler = LaborSampler(indptr, indices, [4], importance_sampling=importance_sampling)
    pos, _ = seed_edges(indptr, seeds)
    p = np.zeros(indices.shape[0])
    p[pos] = np.concatenate(reference_probabilities(indptr, indices, seeds, 4, importance_sampling))
    for b in range(20):
        out = batch(sampler, seeds, b)
        assert out.edge_weight.dtype == np.float32
        for i in range(len(seeds)):
            mine = out.col == i
            if not mine.any():
                continue
            w = out.edge_weight[mine].astype(np.float64)
            expected = (1 / p[out.edge[mine]]) * mine.sum() / (1 / p[out.edge[mine]]).sum()
            np.testing.assert_allclose(w, expected, rtol=2e-3)
            assert abs(w.sum() - mine.sum()) < 1e-4 * mine.sum()


@pytest.mark.parametrize("importance_sampling", [1, -1])
def test_importance_weights_estimate_the_neighborhood_mean(importance_sampling):
    """Averaged over batches, the Horvitz-Thompson estimate ``sum_kept x_t / pi_ts / d_s``
    is the exact in-neighbor mean (unbiased), and the mean aggregation of ``w_ts * x_t``
    (DGL's self-normalized estimate) removes most of the bias that the plain mean of the
    non-uniformly kept neighbors has."""
    indptr, indices, seeds = small_graph()
    fanout, num_batches, n = 4, 3000, len(seeds)
    sampler = LaborSampler(indptr, indices, [fanout], importance_sampling=importance_sampling)
    pos, _ = seed_edges(indptr, seeds)
    p = np.zeros(indices.shape[0])
    p[pos] = np.concatenate(
        reference_probabilities(indptr, indices, seeds, fanout, importance_sampling)
    )
    # Values that grow with pi_t (candidates next to many seeds get larger pi_t), so that
    # an unweighted mean of the kept neighbors is visibly biased.
    x = np.bincount(indices[pos], minlength=SMALL[0]).astype(np.float64) ** 2
    degrees = np.diff(indptr)[seeds]
    truth = np.array([x[indices[indptr[s] : indptr[s + 1]]].mean() for s in seeds])

    horvitz = np.empty((num_batches, n))
    weighted = np.full((num_batches, n), np.nan)
    plain = np.full((num_batches, n), np.nan)
    for b in range(num_batches):
        out = batch(sampler, seeds, b)
        values = x[indices[out.edge]]
        kept = np.bincount(out.col, minlength=n)
        some = kept > 0
        horvitz[b] = np.bincount(out.col, values / p[out.edge], minlength=n) / degrees
        sums = np.bincount(out.col, out.edge_weight * values, minlength=n)
        weighted[b, some] = sums[some] / kept[some]
        plain[b, some] = np.bincount(out.col, values, minlength=n)[some] / kept[some]

    se = horvitz.std(axis=0) / np.sqrt(num_batches)
    assert np.abs((horvitz.mean(axis=0) - truth) / se).max() < 5
    weighted_bias = np.abs(np.nanmean(weighted, axis=0) - truth)
    plain_bias = np.abs(np.nanmean(plain, axis=0) - truth)
    assert plain_bias.sum() > 0.03 * truth.sum()  # the check below means something
    assert weighted_bias.sum() < 0.5 * plain_bias.sum()
    assert weighted_bias.sum() < 0.04 * truth.sum()


@pytest.mark.parametrize("importance_sampling", [0, -1])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_output_layout(importance_sampling, dtype):
    """PyG's layout: seeds first, new nodes by first appearance, edges grouped by hop and by
    frontier node in frontier order, CSC order within a node, ``edge`` the CSC position."""
    indptr, indices = random_csc(300, 6000, 4, dtype)
    seeds = np.random.default_rng(3).choice(300, 30, replace=False)
    fanouts = [5, -1, 3]
    sampler = LaborSampler(indptr, indices, fanouts, importance_sampling=importance_sampling)
    out = batch(sampler, seeds, 1)
    assert np.array_equal(out.node[: out.batch_size], seeds)
    assert len(np.unique(out.node)) == len(out.node)
    assert sum(out.num_sampled_nodes) == len(out.node)
    assert sum(out.num_sampled_edges) == len(out.row) == len(out.edge)
    assert np.array_equal(indices[out.edge], out.node[out.row])
    assert np.array_equal(np.searchsorted(indptr, out.edge, side="right") - 1, out.node[out.col])
    assert (out.edge_weight is None) == (importance_sampling == 0)

    seen = set(seeds.tolist())
    node_start, edge_start = 0, 0
    for hop, fanout in enumerate(fanouts):
        edge_end = edge_start + out.num_sampled_edges[hop]
        col = out.col[edge_start:edge_end]
        edge = out.edge[edge_start:edge_end]
        frontier = np.arange(node_start, node_start + out.num_sampled_nodes[hop])
        assert np.all(np.diff(col) >= 0)  # frontier order
        assert np.all(np.isin(col, frontier))
        for local in frontier:
            mine = edge[col == local]
            assert np.all(np.diff(mine) > 0)  # CSC order, each edge once
            v = out.node[local]
            if fanout == -1 or indptr[v + 1] - indptr[v] <= fanout:
                assert np.array_equal(mine, np.arange(indptr[v], indptr[v + 1]))
        if fanout == -1 and out.edge_weight is not None:
            assert np.all(out.edge_weight[edge_start:edge_end] == 1)
        new = out.node[node_start + out.num_sampled_nodes[hop] :][: out.num_sampled_nodes[hop + 1]]
        expected = []
        for t in out.node[out.row[edge_start:edge_end]]:
            if int(t) not in seen:
                seen.add(int(t))
                expected.append(int(t))
        assert new.tolist() == expected
        node_start += out.num_sampled_nodes[hop]
        edge_start = edge_end


def test_zero_fanout_and_repeated_seeds():
    indptr, indices, seeds = small_graph()
    out = batch(LaborSampler(indptr, indices, [0], importance_sampling=2), seeds, 0)
    assert out.row.size == 0 and out.num_sampled_nodes == (len(seeds), 0)
    assert out.edge_weight is not None and out.edge_weight.size == 0
    assert batch(LaborSampler(indptr, indices, [0]), seeds, 0).edge_weight is None

    # The variates belong to the candidates: a repeated seed gets the same neighbors.
    repeated = np.concatenate([seeds[:5], seeds[:5]])
    out = batch(LaborSampler(indptr, indices, [3], importance_sampling=1), repeated, 3)
    for i in range(5):
        assert np.array_equal(out.edge[out.col == i], out.edge[out.col == i + 5])
        assert np.array_equal(out.edge_weight[out.col == i], out.edge_weight[out.col == i + 5])


@pytest.mark.parametrize("dependent", [True, False])
def test_layer_dependency_reuses_first_hop_variates(dependent):
    """With ``layer_dependency`` a candidate's variate is the same at both hops: kept at hop 1
    with ``pi = k / d_s`` and ``k / d_u >= k / d_s`` means kept at hop 2 for ``u``, and
    dropped at hop 1 with ``k / d_u <= k / d_s`` means dropped at hop 2."""
    indptr, indices = random_csc(200, 6000, 8)
    seeds = np.random.default_rng(4).choice(200, 20, replace=False)
    fanout = 5
    sampler = LaborSampler(indptr, indices, [fanout, fanout], layer_dependency=dependent)
    degrees = np.diff(indptr)
    violations = checked = 0
    for b in range(10):
        out = batch(sampler, seeds, b)
        hop1 = set(out.edge[: out.num_sampled_edges[0]].tolist())
        hop2 = set(out.edge[out.num_sampled_edges[0] :].tolist())
        first = {}  # candidate -> (pi, kept) at hop 1, one seed each
        for s in seeds:
            pi = min(1.0, fanout / degrees[s])
            for e in range(indptr[s], indptr[s + 1]):
                first.setdefault(int(indices[e]), []).append((pi, e in hop1))
        frontier = out.node[out.batch_size : out.batch_size + out.num_sampled_nodes[1]]
        for u in frontier:
            pu = min(1.0, fanout / degrees[u])
            for e in range(indptr[u], indptr[u + 1]):
                for pi, kept in first.get(int(indices[e]), []):
                    if (kept and pu >= pi) or (not kept and pu <= pi):
                        checked += 1
                        violations += kept != (e in hop2)
    assert checked > 200
    if dependent:
        assert violations == 0
    else:
        assert violations > 0


def test_concurrent_calls_match_sequential_ones():
    """Threads sampling at once (the layer-dependent key is per thread) give what one
    thread gives."""
    indptr, indices = random_csc(2000, 40_000, 6)
    sampler = LaborSampler(indptr, indices, [8, 4], importance_sampling=2, layer_dependency=True)
    rng = np.random.default_rng(7)
    seed_lists = [rng.choice(2000, 64, replace=False) for _ in range(16)]
    expected = [batch(sampler, s, i) for i, s in enumerate(seed_lists)]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda i: batch(sampler, seed_lists[i], i), range(16)))
    for a, b in zip(expected, got, strict=True):
        assert np.array_equal(a.node, b.node) and np.array_equal(a.edge, b.edge)
        assert np.array_equal(a.edge_weight, b.edge_weight)


def test_bad_arguments():
    indptr, indices, _ = small_graph()
    with pytest.raises(ValueError, match="'replace' must be False"):
        LaborSampler(indptr, indices, [3], replace=True)
    for bad in (-2, 1.5, True, "1", None):
        with pytest.raises(ValueError, match=f"'importance_sampling'.*{bad!r}"):
            LaborSampler(indptr, indices, [3], importance_sampling=bad)
    with pytest.raises(TypeError, match="'layer_dependency' must be a bool"):
        LaborSampler(indptr, indices, [3], layer_dependency=1)
    with pytest.raises(ValueError, match="'fanouts' entries"):
        LaborSampler(indptr, indices, [3, -2])
    with pytest.raises(TypeError, match="'fanouts'"):
        LaborSampler(indptr, indices, 3)
    with pytest.raises(TypeError, match="'indptr'"):
        LaborSampler(indptr.astype(np.float64), indices, [3])
    with pytest.raises(ValueError, match="'indices' must lie"):
        LaborSampler(indptr, indices + 100, [3])
    with pytest.raises(ValueError, match="'num_threads'"):
        LaborSampler(indptr, indices, [3], num_threads=0)
    sampler = LaborSampler(indptr, indices, [3])
    with pytest.raises(ValueError, match="'node' holds node id 60"):
        batch(sampler, [1, 60], 0)
    with pytest.raises(ValueError, match="'time' must be None"):
        sampler.sample_from_nodes(SamplerInput(np.array([1]), np.array([0]), 0, time=np.array([5])))
    assert "importance_sampling=0" in repr(sampler)
