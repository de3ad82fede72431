"""The Numba neighbor sampler against brute-force Python checks."""

from itertools import combinations

import numba
import numpy as np
import pytest
from scipy.stats import chisquare

import samplers.neighbor
from samplers import LaborSampler, NeighborSampler, SamplerInput, as_edge_index, check_csc
from samplers._kernels.neighbor import EMPTY
from tests.helpers.graphs import random_csc

GRAPHS = [
    pytest.param((200, 3000, 0, np.int32), id="int32-dense"),
    pytest.param((1000, 4000, 1, np.int64), id="int64-sparse"),
]
FANOUTS = [
    pytest.param([5, 3], id="5-3"),
    pytest.param([2, 2, 2], id="2-2-2"),
    pytest.param([-1, 4], id="all-4"),
    pytest.param([70, 1], id="selection-70-1"),
]


def sample(indptr, indices, fanouts, seeds, seed=0, replace=False):
    sampler = NeighborSampler(indptr, indices, fanouts, replace=replace)
    seeds = np.asarray(seeds, dtype=np.int64)
    return sampler.sample_from_nodes(SamplerInput(seeds, np.arange(seeds.size), seed))


def neighbors(indptr, indices, v):
    return indices[indptr[v] : indptr[v + 1]]


def replay(out, fanouts):
    """Rebuild ``node`` from the sampled edges by the PyG rules, in pure Python."""
    node = list(out.node[: out.batch_size])
    local = {}
    for i, v in enumerate(node):
        local.setdefault(int(v), i)
    start = 0
    for hop in range(len(fanouts)):
        end = start + out.num_sampled_edges[hop]
        for e in range(start, end):
            v = int(out.node[out.row[e]])
            if v not in local:
                local[v] = len(node)
                node.append(v)
        start = end
    return np.asarray(node, dtype=np.int64)


@pytest.mark.parametrize("graph", GRAPHS)
@pytest.mark.parametrize("fanouts", FANOUTS)
@pytest.mark.parametrize("replace", [False, True], ids=["no-replace", "replace"])
def test_sample_matches_brute_force_rules(graph, fanouts, replace, id_map):
    num_nodes, num_edges, seed, dtype = graph
    indptr, indices = random_csc(num_nodes, num_edges, seed, dtype)
    seeds = np.random.default_rng(seed).choice(num_nodes, 17, replace=False)
    out = sample(indptr, indices, fanouts, seeds, seed=7, replace=replace)

    assert np.array_equal(out.node[: out.batch_size], seeds)
    assert out.batch_size == len(seeds)
    assert sum(out.num_sampled_nodes) == len(out.node)
    assert sum(out.num_sampled_edges) == len(out.row) == len(out.col) == len(out.edge)
    assert len(np.unique(out.node)) == len(out.node)
    assert np.array_equal(replay(out, fanouts), out.node)

    src, dst = out.node[out.row], out.node[out.col]
    # Every sampled edge exists, and ``edge`` points at it in the CSC arrays.
    assert np.array_equal(indices[out.edge], src)
    assert np.array_equal(np.searchsorted(indptr, out.edge, side="right") - 1, dst)

    node_start, edge_start = 0, 0
    for hop, fanout in enumerate(fanouts):
        frontier = range(node_start, node_start + out.num_sampled_nodes[hop])
        edge_end = edge_start + out.num_sampled_edges[hop]
        hop_col, hop_edge = out.col[edge_start:edge_end], out.edge[edge_start:edge_end]
        for local in frontier:
            mine = hop_edge[hop_col == local]
            degree = len(neighbors(indptr, indices, out.node[local]))
            if fanout < 0:
                expected = degree
            elif replace:
                expected = fanout if degree else 0
            else:
                expected = min(degree, fanout)
            assert len(mine) == expected
            if not replace:
                assert len(np.unique(mine)) == len(mine)
            if not replace and (fanout < 0 or degree <= fanout):
                start = indptr[out.node[local]]
                assert sorted(mine) == list(range(start, start + degree))
        assert set(hop_col) <= set(frontier)
        node_start += out.num_sampled_nodes[hop]
        edge_start = edge_end


def star_graph(degree: int):
    """Node 0 with in-neighbors 1..degree (CSC)."""
    indptr = np.array([0, degree] + [degree] * degree, dtype=np.int64)
    return indptr, np.arange(1, degree + 1, dtype=np.int32)


@pytest.mark.parametrize("degree,fanout", [(5, 1), (6, 2), (7, 3)])
def test_without_replacement_is_uniform_over_subsets(degree, fanout):
    indptr, indices = star_graph(degree)
    draws = 12_000
    out = sample(indptr, indices, [fanout], np.zeros(draws, dtype=np.int64), seed=3)
    subsets = {s: i for i, s in enumerate(combinations(range(1, degree + 1), fanout))}
    counts = np.zeros(len(subsets))
    picked = out.node[out.row].reshape(draws, fanout)
    for row in picked:
        counts[subsets[tuple(sorted(row))]] += 1
    assert counts.min() > 0, "some subset was never drawn"
    assert chisquare(counts).pvalue > 1e-4


def test_with_replacement_is_uniform_per_draw():
    indptr, indices = star_graph(5)
    out = sample(indptr, indices, [3], np.zeros(10_000, dtype=np.int64), replace=True)
    counts = np.bincount(out.node[out.row], minlength=6)[1:]
    assert chisquare(counts).pvalue > 1e-4


def test_large_fanout_selection_sampling_is_uniform():
    indptr, indices = star_graph(100)
    out = sample(indptr, indices, [80], np.zeros(2000, dtype=np.int64))
    counts = np.bincount(out.node[out.row], minlength=101)[1:]
    assert counts.sum() == 80 * 2000
    assert chisquare(counts).pvalue > 1e-4


def test_same_seed_same_batch_any_thread_count():
    indptr, indices = random_csc(3000, 60_000, 5)
    seeds = np.arange(0, 3000, 7)
    results = []
    for threads in (1, numba.config.NUMBA_NUM_THREADS):
        numba.set_num_threads(threads)
        results.append(sample(indptr, indices, [10, 5, 3], seeds, seed=11))
    numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    first, second = results
    for field in ("node", "row", "col", "edge"):
        assert np.array_equal(getattr(first, field), getattr(second, field))
    other = sample(indptr, indices, [10, 5, 3], seeds, seed=12)
    assert not np.array_equal(first.edge, other.edge)


@pytest.mark.parametrize("sampler_class", [NeighborSampler, LaborSampler])
def test_the_batch_edge_index_is_the_samplers_own_rows(sampler_class):
    """The last hop makes ``row`` and ``col`` the rows of one array: the loader's
    ``edge_index`` is that array, equal to the stacked rows, without a copy."""
    indptr, indices = random_csc(500, 6000, 3)
    sampler = sampler_class(indptr, indices, [4, 3, 2])
    for batch in range(3):  # later batches start from the earlier ones' sizes
        seeds = np.arange(batch * 20, batch * 20 + 20, dtype=np.int64)
        out = sampler.sample_from_nodes(SamplerInput(seeds, np.arange(20), batch))
        pair = as_edge_index(out.row, out.col)
        assert np.array_equal(pair, np.stack([out.row, out.col]))
        assert np.shares_memory(pair, out.row) and np.shares_memory(pair, out.col)
        assert np.array_equal(replay(out, [4, 3, 2]), out.node)


def test_edge_index_copies_rows_that_are_not_one_array():
    pair = np.empty((2, 6), dtype=np.int64)  # owns its memory, as the samplers' arrays
    pair[:] = np.arange(12).reshape(2, 6)
    for row, col in [
        (pair[0].copy(), pair[1].copy()),  # two arrays
        (pair[0, :5], pair[1, :5]),  # parts of the rows
        (pair[1], pair[0]),  # the rows swapped
        (pair[0, ::-1], pair[1, ::-1]),  # reversed views
    ]:
        stacked = as_edge_index(row, col)
        assert np.array_equal(stacked, np.stack([row, col]))
        assert not np.shares_memory(stacked, pair)
    assert as_edge_index(pair[0], pair[1]) is pair


def test_relabel_table_grows_past_initial_capacity(id_map):
    indptr, indices = random_csc(50_000, 800_000, 2)
    out = sample(indptr, indices, [-1, -1, -1], [0, 1])
    assert len(out.node) > 4096
    assert np.array_equal(replay(out, [-1, -1, -1]), out.node)


def test_repeated_seeds_keep_their_positions(id_map):
    indptr, indices = random_csc(100, 1000, 4)
    out = sample(indptr, indices, [3], [5, 9, 5])
    assert list(out.node[:3]) == [5, 9, 5]
    assert out.batch_size == 3


def test_seed_out_of_range_names_it():
    indptr, indices = random_csc(10, 30, 0)
    with pytest.raises(ValueError, match="node id 10, outside"):
        sample(indptr, indices, [2], [1, 10])
    with pytest.raises(ValueError, match="node id -1, outside"):
        sample(indptr, indices, [2], [-1])


@pytest.mark.parametrize("fanouts", [[-2], "15,10", [1.5], [True]])
def test_bad_fanouts(fanouts):
    indptr, indices = random_csc(10, 30, 0)
    with pytest.raises((ValueError, TypeError), match="'fanouts'"):
        NeighborSampler(indptr, indices, fanouts)


def test_malformed_csc_errors():
    indptr = np.array([0, 2, 3], dtype=np.int64)
    indices = np.array([1, 0, 1], dtype=np.int32)
    check_csc(indptr, indices)
    with pytest.raises(TypeError, match="'indptr' must be a 1-D int64"):
        check_csc(indptr.astype(np.int32), indices)
    with pytest.raises(TypeError, match="'indices' must be a 1-D int32 or int64"):
        check_csc(indptr, indices.astype(np.float32))
    with pytest.raises(ValueError, match="must start at 0"):
        check_csc(np.array([1, 2, 3], dtype=np.int64), indices)
    with pytest.raises(ValueError, match="must end at len"):
        check_csc(np.array([0, 2, 2], dtype=np.int64), indices)
    with pytest.raises(ValueError, match="non-decreasing"):
        check_csc(np.array([0, 3, 2, 3], dtype=np.int64), indices)
    with pytest.raises(ValueError, match=r"must lie in \[0, 2\).*found 5"):
        check_csc(indptr, np.array([1, 5, 1], dtype=np.int32))
    with pytest.raises(ValueError, match="found -1"):
        check_csc(indptr, np.array([1, -1, 1], dtype=np.int32))


def test_in_degree_above_max_bound_is_refused():
    # A fake CSC (validate=False): node 1's in-degree is 2**32 + 1 without allocating it.
    bound = 2**32
    indices = np.zeros(3, dtype=np.int64)
    too_wide = np.array([0, 1, bound + 2], dtype=np.int64)
    with pytest.raises(ValueError, match=f"in-degrees above {bound} are not supported"):
        NeighborSampler(too_wide, indices, [2], validate=False)
    at_bound = np.array([0, 1, bound + 1], dtype=np.int64)
    assert NeighborSampler(at_bound, indices, [2], validate=False).num_nodes == 2


def test_tag_repeats_numbers_each_repeat_of_a_seed():
    from samplers.hop import REPEAT_SHIFT, tag_repeats, untag

    ids = np.array([5, 3, 5, 9, 5, 3], dtype=np.int64)
    tagged = tag_repeats(ids)
    expected_repeat = [0, 0, 1, 0, 2, 1]  # how often each id appeared before it
    np.testing.assert_array_equal(tagged, ids + (np.array(expected_repeat) << REPEAT_SHIFT))
    back, tags = untag(tagged)
    np.testing.assert_array_equal(back, ids)
    assert len(np.unique(tagged)) == len(ids) and (tags >> REPEAT_SHIFT).tolist() == expected_repeat
    unique = np.array([4, 1, 7], dtype=np.int64)
    assert tag_repeats(unique) is unique


def test_a_node_draws_the_same_neighbors_wherever_it_sits_in_the_frontier():
    """Streams are keyed by node id: the same seeds in another order give each seed the
    same neighbors (the batch-local numbering differs)."""
    indptr, indices = random_csc(200, 3000, seed=4)
    seeds = np.array([3, 17, 42, 99, 150], dtype=np.int64)
    first = sample(indptr, indices, [4], seeds, seed=8)
    second = sample(indptr, indices, [4], seeds[::-1].copy(), seed=8)

    def neighbors_by_seed(out):
        return {
            int(out.node[c]): sorted(out.node[out.row[out.col == c]].tolist())
            for c in range(len(seeds))
        }

    assert neighbors_by_seed(first) == neighbors_by_seed(second)


@pytest.mark.parametrize("replace", [False, True], ids=["no-replace", "replace"])
def test_dense_and_hash_id_maps_give_the_same_batches(replace, monkeypatch):
    indptr, indices = random_csc(3000, 40_000, seed=6)
    seeds = np.random.default_rng(6).choice(3000, 300)  # with repeats
    dense = NeighborSampler(indptr, indices, [8, 4, -1], replace=replace)
    batches = [dense.sample_from_nodes(SamplerInput(seeds, np.arange(300), s)) for s in range(3)]
    assert len(dense._id_maps.free) == 1  # one map, reused batch after batch
    assert (dense._id_maps.free[0] == EMPTY).all()
    monkeypatch.setattr(samplers.neighbor, "DENSE_IDS_MAX_NODES", 0)
    hashed = NeighborSampler(indptr, indices, [8, 4, -1], replace=replace)
    for s, batch in enumerate(batches):
        expected = hashed.sample_from_nodes(SamplerInput(seeds, np.arange(300), s))
        for field in ("node", "row", "col", "edge", "num_sampled_nodes", "num_sampled_edges"):
            assert np.array_equal(getattr(batch, field), getattr(expected, field)), field
    assert hashed._id_maps is None


def test_a_failed_batch_leaves_no_ids_behind(monkeypatch):
    """A call that fails part way drops its dense map (half filled) instead of handing it to
    the next call."""
    indptr, indices = random_csc(500, 5000, seed=3)
    seeds = np.arange(0, 500, 9)
    sampler = NeighborSampler(indptr, indices, [5, 5])
    expected = sampler.sample_from_nodes(SamplerInput(seeds, seeds, 1))
    hop = NeighborSampler.sample_hop

    def fail_on_second_hop(self, frontier, *args, **kwargs):
        if frontier.shape[0] != seeds.shape[0]:
            raise RuntimeError("the second hop failed")
        return hop(self, frontier, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(NeighborSampler, "sample_hop", fail_on_second_hop)
        with pytest.raises(RuntimeError, match="second hop"):
            sampler.sample_from_nodes(SamplerInput(seeds, seeds, 1))
    again = sampler.sample_from_nodes(SamplerInput(seeds, seeds, 1))
    for field in ("node", "row", "col", "edge"):
        assert np.array_equal(getattr(again, field), getattr(expected, field))
