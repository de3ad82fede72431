"""The sampler's modes (disjoint trees, bidirectional and induced subgraphs, weighted and
temporal draws) against brute-force Python references on random graphs."""

from itertools import permutations

import numba
import numpy as np
import pytest
from scipy.stats import chisquare

from samplers import NeighborSampler, SamplerInput
from tests.helpers.graphs import random_csc

SEEDS = np.array([3, 17, 3, 42, 99, 120, 7], dtype=np.int64)


def graph(num_nodes=150, num_edges=1500, seed=0):
    return random_csc(num_nodes, num_edges, seed, np.int64)


def run(sampler, seeds=SEEDS, seed=5, time=None):
    seeds = np.asarray(seeds, dtype=np.int64)
    return sampler.sample_from_nodes(SamplerInput(seeds, np.arange(seeds.size), seed, time))


def destination(indptr, edge):
    """The destination node of each CSC position."""
    return np.searchsorted(indptr, edge, side="right") - 1


def check_edges_exist(indptr, indices, out):
    np.testing.assert_array_equal(indices[out.edge], out.node[out.row])
    np.testing.assert_array_equal(destination(indptr, out.edge), out.node[out.col])


def test_disjoint_trees_are_separate_and_complete():
    indptr, indices = graph()
    fanouts = [4, 3]
    out = run(NeighborSampler(indptr, indices, fanouts, disjoint=True))
    check_edges_exist(indptr, indices, out)
    np.testing.assert_array_equal(out.node[: SEEDS.size], SEEDS)
    np.testing.assert_array_equal(out.batch[: SEEDS.size], np.arange(SEEDS.size))
    np.testing.assert_array_equal(out.batch[out.row], out.batch[out.col])  # edges stay in a tree
    pairs = set(zip(out.batch.tolist(), out.node.tolist(), strict=True))
    assert len(pairs) == out.node.size  # a node appears once per tree
    # Every tree node of the frontier gets min(in-degree, fanout) neighbors, per hop.
    start, first = 0, 0
    for hop, fanout in enumerate(fanouts):
        count = out.num_sampled_nodes[hop]
        got = np.bincount(
            out.col[first : first + out.num_sampled_edges[hop]], minlength=start + count
        )
        degrees = np.diff(indptr)[out.node[start : start + count]]
        np.testing.assert_array_equal(got[start : start + count], np.minimum(degrees, fanout))
        first += out.num_sampled_edges[hop]
        start += count


def test_disjoint_single_seed_equals_shared_sampling():
    indptr, indices = graph()
    shared = run(NeighborSampler(indptr, indices, [5, 5]), seeds=[17])
    disjoint = run(NeighborSampler(indptr, indices, [5, 5], disjoint=True), seeds=[17])
    for field in ("node", "row", "col", "edge"):
        np.testing.assert_array_equal(getattr(shared, field), getattr(disjoint, field))
    assert (disjoint.batch == 0).all() and shared.batch is None


def test_bidirectional_is_sampled_edges_and_their_reverses():
    indptr, indices = graph()
    directional = run(NeighborSampler(indptr, indices, [5, 3]))
    out = run(NeighborSampler(indptr, indices, [5, 3], subgraph_type="bidirectional"))
    np.testing.assert_array_equal(out.node, directional.node)
    pairs = set(zip(directional.row.tolist(), directional.col.tolist(), strict=True))
    expected = sorted(pairs | {(c, r) for r, c in pairs}, key=lambda p: (p[1], p[0]))
    assert list(zip(out.row.tolist(), out.col.tolist(), strict=True)) == expected
    assert out.num_sampled_nodes is None and out.num_sampled_edges is None
    pairs_sampled = zip(directional.row.tolist(), directional.col.tolist(), strict=True)
    sampled = dict(zip(pairs_sampled, directional.edge.tolist(), strict=True))
    for r, c, e in zip(out.row.tolist(), out.col.tolist(), out.edge.tolist(), strict=True):
        assert e == sampled.get((r, c), sampled.get((c, r)))


@pytest.mark.parametrize("disjoint", [False, True], ids=["shared", "disjoint"])
def test_induced_subgraph_holds_every_edge_between_sampled_nodes(disjoint):
    indptr, indices = graph()
    directional = run(NeighborSampler(indptr, indices, [3, 2], disjoint=disjoint))
    out = run(NeighborSampler(indptr, indices, [3, 2], disjoint=disjoint, subgraph_type="induced"))
    np.testing.assert_array_equal(out.node, directional.node)
    check_edges_exist(indptr, indices, out)
    trees = out.batch if disjoint else np.zeros(out.node.size, dtype=np.int64)
    local = {}  # a repeated seed keeps its first local id
    for i, (t, v) in enumerate(zip(trees.tolist(), out.node.tolist(), strict=True)):
        local.setdefault((t, v), i)
    expected = []
    for i, (t, v) in enumerate(zip(trees.tolist(), out.node.tolist(), strict=True)):
        for e in range(indptr[v], indptr[v + 1]):
            j = local.get((t, int(indices[e])))
            if j is not None:
                expected.append((j, i, e))
    assert list(zip(out.row.tolist(), out.col.tolist(), out.edge.tolist(), strict=True)) == expected


def one_node_graph(weights):
    """Node 0 with in-edges from nodes 1..len(weights)."""
    d = len(weights)
    indptr = np.array([0, d] + [d] * d, dtype=np.int64)
    return indptr, np.arange(1, d + 1, dtype=np.int64)


WEIGHTS = np.array([1.0, 0.0, 3.0, 0.5, 2.0, 5.0])


def draws(sampler, repeats=6000, seed=11):
    out = run(sampler, seeds=np.zeros(repeats, dtype=np.int64), seed=seed)
    first_hop = out.num_sampled_edges[0]
    return out.edge[:first_hop].reshape(repeats, -1)  # seeds repeat: each draws on its own


def test_weighted_with_replacement_draws_in_proportion_to_weight():
    indptr, indices = one_node_graph(WEIGHTS)
    picks = draws(NeighborSampler(indptr, indices, [3], replace=True, weights=WEIGHTS))
    counts = np.bincount(picks.ravel(), minlength=WEIGHTS.size)
    assert counts[1] == 0  # weight 0: never
    positive = WEIGHTS > 0
    expected = WEIGHTS[positive] / WEIGHTS.sum() * picks.size
    assert chisquare(counts[positive], expected).pvalue > 1e-4


def test_weighted_without_replacement_follows_successive_sampling():
    indptr, indices = one_node_graph(WEIGHTS)
    picks = draws(NeighborSampler(indptr, indices, [2], weights=WEIGHTS), repeats=12000)
    observed = {}
    for a, b in picks.tolist():
        assert a != b and 1 not in (a, b)
        observed[(min(a, b), max(a, b))] = observed.get((min(a, b), max(a, b)), 0) + 1
    total = WEIGHTS.sum()
    exact = {}
    for a, b in permutations(np.flatnonzero(WEIGHTS).tolist(), 2):  # torch.multinomial's law
        p = WEIGHTS[a] / total * WEIGHTS[b] / (total - WEIGHTS[a])
        exact[(min(a, b), max(a, b))] = exact.get((min(a, b), max(a, b)), 0.0) + p
    keys = sorted(exact)
    assert set(observed) <= set(keys)
    f_obs = np.array([observed.get(k, 0) for k in keys])
    f_exp = np.array([exact[k] for k in keys]) * picks.shape[0]
    assert chisquare(f_obs, f_exp).pvalue > 1e-4


def test_weighted_takes_only_positive_edges_when_the_fanout_covers_them():
    indptr, indices = one_node_graph(WEIGHTS)
    for fanout in (5, 9, -1):
        picks = draws(NeighborSampler(indptr, indices, [fanout], weights=WEIGHTS), repeats=3)
        for row in picks:
            assert sorted(row.tolist()) == np.flatnonzero(WEIGHTS).tolist()


@pytest.mark.parametrize("replace", [True, False], ids=["replace", "no-replace"])
def test_weights_whose_sum_overflows_are_drawn_in_proportion(replace):
    """Weights near float64's largest sum past it (to inf, which sent every draw to the last
    edge): the draws follow the weights all the same, exactly as the same weights divided by
    a power of two do (the sums are scaled by a power of two, which is exact)."""
    proportions = np.array([2.0, 1.0, 3.0])
    huge = proportions * 2.0**1022  # each finite, their sum past float64's largest
    indptr, indices = one_node_graph(huge)
    picks = draws(NeighborSampler(indptr, indices, [1], replace=replace, weights=huge))
    counts = np.bincount(picks.ravel(), minlength=3)
    assert chisquare(counts, proportions / proportions.sum() * picks.size).pvalue > 1e-4
    ordinary = draws(NeighborSampler(indptr, indices, [1], replace=replace, weights=proportions))
    np.testing.assert_array_equal(picks, ordinary)
    equal = np.array([1e308, 1e308])
    indptr, indices = one_node_graph(equal)
    picks = draws(NeighborSampler(indptr, indices, [1], replace=replace, weights=equal), 200)
    assert set(picks.ravel().tolist()) == {0, 1}


@pytest.mark.parametrize("bad", [-1.0, np.nan, np.inf])
def test_weighted_refuses_negative_or_non_finite_weights(bad):
    weights = WEIGHTS.copy()
    weights[4] = bad
    indptr, indices = one_node_graph(weights)
    with pytest.raises(ValueError, match=r"finite and >= 0.*edge 4"):
        NeighborSampler(indptr, indices, [2], weights=weights)
    with pytest.raises(ValueError, match=r"shape \(6,\)"):
        NeighborSampler(indptr, indices, [2], weights=weights[:3])


@pytest.mark.parametrize("level", ["node", "edge"])
@pytest.mark.parametrize("strategy", ["uniform", "last"])
def test_temporal_never_samples_the_future(level, strategy):
    indptr, indices = graph(seed=2)
    rng = np.random.default_rng(3)
    node_time = rng.integers(0, 50, indptr.size - 1)
    edge_time = rng.integers(0, 50, indices.size)  # unsorted within nodes
    times = {"node_time": node_time} if level == "node" else {"edge_time": edge_time}
    sampler = NeighborSampler(indptr, indices, [3, 3], temporal_strategy=strategy, **times)
    seed_time = rng.integers(10, 50, SEEDS.size)
    out = run(sampler, time=seed_time)
    check_edges_exist(indptr, indices, out)
    assert out.batch is not None  # temporal sampling is disjoint, as in PyG
    limit = seed_time[out.batch[out.col]]
    when = node_time[out.node[out.row]] if level == "node" else edge_time[out.edge]
    assert (when <= limit).all()
    # Each frontier node gets min(#edges no later than its seed, fanout) of them; 'last'
    # takes the most recent ones.
    for i in np.unique(out.col):
        v = out.node[i]
        edges = np.arange(indptr[v], indptr[v + 1])
        edge_when = node_time[indices[edges]] if level == "node" else edge_time[edges]
        valid = edges[edge_when <= seed_time[out.batch[i]]]
        got = out.edge[out.col == i]
        assert got.size == min(valid.size, 3) and set(got) <= set(valid)
        if strategy == "last":
            valid_when = np.sort(edge_when[edge_when <= seed_time[out.batch[i]]])
            got_when = node_time[indices[got]] if level == "node" else edge_time[got]
            np.testing.assert_array_equal(
                np.sort(got_when), valid_when[valid_when.size - got.size :]
            )


def test_temporal_uniform_draws_uniformly_among_the_past():
    weights = np.ones(6)
    indptr, indices = one_node_graph(weights)
    edge_time = np.array([5, 1, 9, 3, 7, 2])
    sampler = NeighborSampler(indptr, indices, [1], edge_time=edge_time)
    repeats = 6000
    out = run(sampler, seeds=np.zeros(repeats, dtype=np.int64), seed=3, time=np.full(repeats, 5))
    counts = np.bincount(out.edge[: out.num_sampled_edges[0]], minlength=6)
    past = edge_time <= 5
    assert (counts[~past] == 0).all()
    assert chisquare(counts[past]).pvalue > 1e-4


def test_temporal_seed_times_default_to_node_times_and_edge_times_need_them():
    indptr, indices = graph()
    node_time = np.arange(indptr.size - 1)
    out = run(NeighborSampler(indptr, indices, [5], node_time=node_time))
    assert out.seed_time is None  # as PyG: only times the input gives are handed out
    limits = node_time[SEEDS][out.batch[out.col]]
    assert (node_time[out.node[out.row]] <= limits).all()  # limited by the seeds' own times
    with pytest.raises(ValueError, match="needs each seed's time"):
        run(NeighborSampler(indptr, indices, [5], edge_time=np.zeros(indices.size, np.int64)))
    with pytest.raises(TypeError, match="integer times"):
        NeighborSampler(indptr, indices, [5], node_time=node_time.astype(float))
    with pytest.raises(ValueError, match="does not sample by time"):
        run(NeighborSampler(indptr, indices, [5]), time=np.zeros(SEEDS.size, np.int64))
    with pytest.raises(ValueError, match="no induced"):
        NeighborSampler(indptr, indices, [5], node_time=node_time, subgraph_type="induced")


MODES = [
    pytest.param({"disjoint": True}, id="disjoint"),
    pytest.param({"subgraph_type": "induced"}, id="induced"),
    pytest.param({"weights": np.linspace(0, 2, 1451)}, id="weighted"),
    pytest.param({"weights": np.linspace(0, 2, 1451), "replace": True}, id="weighted-replace"),
    pytest.param({"node_time": np.arange(150) % 40}, id="temporal"),
]


@pytest.mark.parametrize("mode", MODES)
def test_modes_do_not_depend_on_threads(mode):
    indptr, indices = graph()
    sampler = NeighborSampler(indptr, indices, [6, 4], **mode)
    outputs = []
    for threads in (1, 2):
        numba.set_num_threads(threads)
        outputs.append(run(sampler))
    numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    for field in ("node", "row", "col", "edge"):
        np.testing.assert_array_equal(getattr(outputs[0], field), getattr(outputs[1], field))


def successive_sampling_law(weights, k):
    """The exact probability of each k-set of edges under successive draws proportional to
    weight among the edges left (torch.multinomial without replacement), by enumeration."""
    law = {}
    total = weights.sum()

    def extend(prefix, left, p):
        if len(prefix) == k:
            key = tuple(sorted(prefix))
            law[key] = law.get(key, 0.0) + p
            return
        for e in np.flatnonzero(weights):
            if e not in prefix:
                extend([*prefix, int(e)], left - weights[e], p * weights[e] / left)

    extend([], total, 1.0)
    return law


@pytest.mark.parametrize(
    "weights,fanout",
    [
        pytest.param(np.array([1.0, 2.0, 0.0, 3.0, 0.5, 1.5]), 3, id="clocks-from-the-start"),
        pytest.param(
            np.array([1000.0, 1e-3, 2e-3, 1e-3, 3e-3, 1e-3]), 2, id="rejection-then-clocks"
        ),
    ],
)
def test_weighted_paths_follow_successive_sampling(weights, fanout):
    indptr, indices = one_node_graph(weights)
    picks = draws(NeighborSampler(indptr, indices, [fanout], weights=weights), repeats=8000)
    law = successive_sampling_law(weights, fanout)
    observed = {}
    for row in picks.tolist():
        observed[tuple(sorted(row))] = observed.get(tuple(sorted(row)), 0) + 1
    keys = sorted(law)
    assert set(observed) <= set(keys)
    expected = np.array([law[k] for k in keys]) * picks.shape[0]
    common = expected >= 5  # chi-square's rule: pool the rare sets
    f_obs = np.array([observed.get(k, 0) for k in keys])
    f_obs = np.append(f_obs[common], f_obs[~common].sum())
    f_exp = np.append(expected[common], expected[~common].sum())
    assert chisquare(f_obs[f_exp > 0], f_exp[f_exp > 0]).pvalue > 1e-4


def test_weighted_large_fanout_draws_by_clocks_in_proportion():
    rng = np.random.default_rng(0)
    weights = rng.random(200) + 0.05
    weights[:50] *= 10
    indptr, indices = one_node_graph(weights)
    picks = draws(NeighborSampler(indptr, indices, [40], weights=weights), repeats=400)
    assert all(len(set(row)) == 40 for row in picks.tolist())
    # Heavier edges are drawn more often: the first 50 (10x) clearly above the rest.
    counts = np.bincount(picks.ravel(), minlength=200)
    assert counts[:50].mean() > 2 * counts[50:].mean()


def test_weighted_and_temporal_together():
    indptr, indices = graph(seed=5)
    rng = np.random.default_rng(6)
    weights = rng.random(indices.size)
    weights[::4] = 0.0
    edge_time = rng.integers(0, 30, indices.size)  # unsorted: the sampler reorders its copy
    sampler = NeighborSampler(indptr, indices, [4, 3], weights=weights, edge_time=edge_time)
    seed_time = rng.integers(10, 30, SEEDS.size)
    out = run(sampler, time=seed_time)
    check_edges_exist(indptr, indices, out)
    assert (weights[out.edge] > 0).all()
    assert (edge_time[out.edge] <= seed_time[out.batch[out.col]]).all()
