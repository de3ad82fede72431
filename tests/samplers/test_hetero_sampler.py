"""The heterogeneous Numba neighbor sampler against brute-force Python replays of PyG's rules."""

import warnings

import numba
import numpy as np
import pytest

from samplers import NeighborSampler, SamplerInput
from samplers._kernels.neighbor import EMPTY
from samplers.hetero import HeteroNeighborSampler, hetero_fanouts
from samplers.neighbor import merge_reverse
from tests.helpers.graphs import random_csc

NUM_NODES = {"a": 40, "b": 30, "c": 25}
WRITES = ("a", "writes", "b")
REV_WRITES = ("b", "rev_writes", "a")
CITES = ("b", "cites", "b")
IN = ("c", "in", "a")
TO = ("a", "to", "c")
EDGE_TYPES = [WRITES, REV_WRITES, CITES, IN, TO]


def csc_from_coo(src, dst, num_dst, dtype=np.int64):
    """CSC ``(indptr, indices)`` of the distinct pairs ``(src, dst)``, sources shuffled within
    each destination (so that CSC order is not sorted by source)."""
    pairs = np.unique(np.stack([dst, src], axis=1), axis=0)
    rng = np.random.default_rng(len(pairs))
    pairs = pairs[np.lexsort((rng.random(len(pairs)), pairs[:, 0]))]
    indptr = np.zeros(num_dst + 1, dtype=np.int64)
    np.cumsum(np.bincount(pairs[:, 0], minlength=num_dst), out=indptr[1:])
    return indptr, pairs[:, 1].astype(dtype)


def make_graph(seed=0):
    """Three node types, five edge types: ``writes`` and its exact reverse ``rev_writes``, a
    self-type relation ``cites``, and ``in``/``to`` between ``c`` and ``a`` (each the other's
    only reverse). Sizes leave some nodes without in-edges of a type."""
    rng = np.random.default_rng(seed)
    csc = {}
    coo = {}
    for edge_type, count in [(WRITES, 160), (CITES, 150), (IN, 90), (TO, 70)]:
        src_type, _, dst_type = edge_type
        coo[edge_type] = (
            rng.integers(0, NUM_NODES[src_type], count),
            rng.integers(0, NUM_NODES[dst_type], count),
        )
    for edge_type in [WRITES, REV_WRITES, CITES, IN, TO]:
        if edge_type == REV_WRITES:
            dst, src = coo[WRITES]
        else:
            src, dst = coo[edge_type]
        dtype = np.int32 if edge_type == CITES else np.int64
        csc[edge_type] = csc_from_coo(src, dst, NUM_NODES[edge_type[2]], dtype)
    return csc


GRAPH = make_graph()


def sampler(num_neighbors=(3, 2), csc=GRAPH, **kwargs):
    if not isinstance(num_neighbors, dict):
        num_neighbors = list(num_neighbors)
    return HeteroNeighborSampler(list(NUM_NODES), NUM_NODES, csc, num_neighbors, **kwargs)


def every(fanouts):
    """The same fanouts for every edge type."""
    return {e: list(fanouts) for e in EDGE_TYPES}


def run(s, seeds, seed=7, input_type="a", time=None):
    seeds = np.asarray(seeds, dtype=np.int64)
    return s.sample_from_nodes(
        SamplerInput(seeds, np.arange(seeds.size), seed, time=time, input_type=input_type)
    )


def replay(
    out,
    csc,
    fanouts,
    seeds,
    input_type,
    replace=False,
    eligible=None,
    pick_last=None,
):
    """Check ``out`` hop by hop against PyG's rules, in pure Python.

    Each frontier node of a hop's destination type (the nodes of that type new at the
    previous hop) gets ``min(candidates, fanout)`` distinct in-edges of the edge type among
    its candidates (``eligible(edge_type, dst_local, edge)``, all edges when ``None``);
    every edge exists, its row is its source's local id, new sources are numbered per type in
    order of first appearance; in disjoint sampling a source joins its destination's tree.
    ``pick_last(edge_type, candidates, fanout)`` gives the exact edge set when it is known.
    """
    disjoint = out.batch is not None
    edge_types = sorted(csc)  # the order the sampler runs the edge types in
    num_hops = len(next(iter(fanouts.values())))
    node = {t: [] for t in NUM_NODES}
    local = {t: {} for t in NUM_NODES}
    for i, v in enumerate(seeds):
        k = (int(v), i) if disjoint else int(v)
        local[input_type].setdefault(k, i)
        node[input_type].append(k)
    frontier = {t: (0, 0) for t in NUM_NODES}
    frontier[input_type] = (0, len(seeds))
    pos = dict.fromkeys(edge_types, 0)
    for hop in range(num_hops):
        hop_start = {t: len(node[t]) for t in NUM_NODES}
        for edge_type in edge_types:
            src, _, dst = edge_type
            indptr, indices = csc[edge_type]
            count = out.num_sampled_edges[edge_type][hop]
            lo = pos[edge_type]
            rows = out.row[edge_type][lo : lo + count]
            cols = out.col[edge_type][lo : lo + count]
            edges = out.edge[edge_type][lo : lo + count]
            pos[edge_type] = lo + count
            fanout = fanouts[edge_type][hop]
            first, last = frontier[dst]
            assert np.all((cols >= first) & (cols < last))
            assert np.all(np.diff(cols) >= 0), "edges grouped by destination"
            for j in range(first, last):
                v = int(out.node[dst][j])
                candidates = [
                    e
                    for e in range(indptr[v], indptr[v + 1])
                    if eligible is None or eligible(edge_type, j, e)
                ]
                got = edges[cols == j]
                if fanout < 0:
                    expected = len(candidates)
                elif replace:
                    expected = fanout if candidates else 0
                else:
                    expected = min(len(candidates), fanout)
                assert len(got) == expected, (edge_type, hop, j)
                assert set(got.tolist()) <= set(candidates)
                if not replace or fanout < 0:
                    assert len(set(got.tolist())) == len(got)
                if pick_last is not None:
                    assert set(got.tolist()) == pick_last(edge_type, candidates, fanout)
            for r, c, e in zip(rows, cols, edges, strict=True):
                g = int(indices[e])
                k = (g, int(out.batch[dst][c])) if disjoint else g
                if k not in local[src]:
                    local[src][k] = len(node[src])
                    node[src].append(k)
                assert r == local[src][k]
        for t in NUM_NODES:
            frontier[t] = (hop_start[t], len(node[t]))
            assert out.num_sampled_nodes[t][hop + 1] == len(node[t]) - hop_start[t]
    for t in NUM_NODES:
        if disjoint:
            expected_node = [k[0] for k in node[t]]
            np.testing.assert_array_equal(out.batch[t], [k[1] for k in node[t]])
        else:
            expected_node = node[t]
        np.testing.assert_array_equal(out.node[t], np.asarray(expected_node, dtype=np.int64))
    for edge_type in edge_types:
        assert pos[edge_type] == out.row[edge_type].shape[0]


def check_edges_exist(out, csc):
    """Every sampled edge is an edge of its type: local ids mapped back through ``node``."""
    for edge_type, (indptr, indices) in csc.items():
        src, _, dst = edge_type
        edges = out.edge[edge_type]
        g_src = out.node[src][out.row[edge_type]]
        g_dst = out.node[dst][out.col[edge_type]]
        np.testing.assert_array_equal(indices[edges], g_src)
        assert np.all((indptr[g_dst] <= edges) & (edges < indptr[g_dst + 1]))


def check_counts(out, num_hops, input_type):
    for t, counts in out.num_sampled_nodes.items():
        assert len(counts) == num_hops + 1
        assert sum(counts) == out.node[t].shape[0]
        if t != input_type:
            assert counts[0] == 0
    assert out.num_sampled_nodes[input_type][0] == out.batch_size
    for edge_type, counts in out.num_sampled_edges.items():
        assert len(counts) == num_hops
        assert sum(counts) == out.row[edge_type].shape[0] == out.col[edge_type].shape[0]


def assert_same(a, b):
    assert a.node.keys() == b.node.keys() and a.row.keys() == b.row.keys()
    for t in a.node:
        np.testing.assert_array_equal(a.node[t], b.node[t])
        if a.batch is not None:
            np.testing.assert_array_equal(a.batch[t], b.batch[t])
    for e in a.row:
        np.testing.assert_array_equal(a.row[e], b.row[e])
        np.testing.assert_array_equal(a.col[e], b.col[e])
        if a.edge[e] is None:
            assert b.edge[e] is None
        else:
            np.testing.assert_array_equal(a.edge[e], b.edge[e])
    assert a.num_sampled_nodes == b.num_sampled_nodes
    assert a.num_sampled_edges == b.num_sampled_edges


SEEDS = {"a": [3, 17, 0, 29, 11], "b": [4, 22, 9], "c": [1, 2, 24, 13]}


@pytest.mark.parametrize("input_type", ["a", "b", "c"])
@pytest.mark.parametrize(
    "fanouts", [[3, 2], [1, 1, 1], [-1, 2], [2, 0]], ids=["3-2", "1-1-1", "all-2", "2-0"]
)
@pytest.mark.parametrize("replace", [False, True], ids=["no-replace", "replace"])
def test_matches_brute_force_rules(input_type, fanouts, replace, id_map):
    s = sampler(fanouts, replace=replace)
    seeds = SEEDS[input_type]
    out = run(s, seeds, seed=5, input_type=input_type)
    assert set(out.node) == set(NUM_NODES) and set(out.row) == set(EDGE_TYPES)
    assert out.input_type == input_type and out.batch is None and out.seed_time is None
    np.testing.assert_array_equal(out.node[input_type][: len(seeds)], seeds)
    check_counts(out, len(fanouts), input_type)
    check_edges_exist(out, GRAPH)
    replay(out, GRAPH, every(fanouts), seeds, input_type, replace)
    for t in NUM_NODES:  # shared trees: each node once per type
        assert np.unique(out.node[t]).shape[0] == out.node[t].shape[0]
    for edge_type in EDGE_TYPES:
        for a in (out.row, out.col, out.edge):
            assert a[edge_type].dtype == np.int64


def test_samples_reach_every_type():
    out = run(sampler([3, 3]), SEEDS["a"])
    for t in NUM_NODES:
        assert out.node[t].shape[0] > 0
    for edge_type in EDGE_TYPES:
        assert out.row[edge_type].shape[0] > 0, edge_type


def test_repeated_seeds(id_map):
    seeds = [3, 17, 3, 3, 0]
    out = run(sampler([2, 2]), seeds)
    np.testing.assert_array_equal(out.node["a"][:5], seeds)
    replay(out, GRAPH, every([2, 2]), seeds, "a")


def test_each_node_type_reuses_one_dense_id_map():
    s = sampler([3, 2])
    first = run(s, SEEDS["a"], seed=1)
    second = run(s, SEEDS["a"], seed=1)
    assert_same(first, second)
    for t in NUM_NODES:
        assert len(s._id_maps[t].free) == 1 and (s._id_maps[t].free[0] == EMPTY).all()
    disjoint = sampler([3, 2], disjoint=True)  # trees in the keys: hash tables only
    run(disjoint, SEEDS["a"])
    assert all(disjoint._id_maps[t].free == [] for t in NUM_NODES)


def test_deterministic_and_seed_dependent():
    s = sampler([3, 2])
    assert_same(run(s, SEEDS["a"], seed=1), run(s, SEEDS["a"], seed=1))
    first, second = run(s, SEEDS["a"], seed=1), run(s, SEEDS["a"], seed=2)
    assert any(not np.array_equal(first.edge[e], second.edge[e]) for e in EDGE_TYPES)


def test_list_equals_equivalent_dict():
    by_list = run(sampler([3, 2]), SEEDS["b"], input_type="b")
    as_dict = {e: [3, 2] for e in EDGE_TYPES}
    by_dict = run(sampler(as_dict), SEEDS["b"], input_type="b")
    assert_same(by_list, by_dict)
    as_strings = {"__".join(e): [3, 2] for e in EDGE_TYPES}
    assert_same(by_list, run(sampler(as_strings), SEEDS["b"], input_type="b"))


def test_per_type_fanouts_zero_and_missing():
    fanouts = {WRITES: [2, 3], REV_WRITES: [0, 0], CITES: [1, 4], TO: [-1, 1]}  # IN missing
    with pytest.raises(ValueError, match="Missing number of neighbors for edge type"):
        sampler(fanouts)
    fanouts[IN] = [0, 0]
    s = sampler(fanouts)
    out = run(s, SEEDS["a"])
    expected = dict(fanouts)
    assert hetero_fanouts(fanouts, EDGE_TYPES) == {e: tuple(f) for e, f in expected.items()}
    for edge_type in (REV_WRITES, IN):
        assert out.row[edge_type].shape == (0,) and out.num_sampled_edges[edge_type] == (0, 0)
    replay(out, GRAPH, expected, SEEDS["a"], "a")
    check_edges_exist(out, GRAPH)


def test_edge_types_draw_independently():
    """An edge type's draws do not depend on the other types' fanouts."""
    full = run(sampler({e: [2, 2] for e in EDGE_TYPES}), SEEDS["a"], seed=3)
    others = {e: [0, 0] for e in EDGE_TYPES}
    part = run(sampler({**others, IN: [2, 2], REV_WRITES: [2, 0]}), SEEDS["a"], seed=3)
    for edge_type in (IN, REV_WRITES):  # hop 0: the same seeds under the same streams
        hop0 = full.num_sampled_edges[edge_type][0]
        assert hop0 > 0
        np.testing.assert_array_equal(part.edge[edge_type][:hop0], full.edge[edge_type][:hop0])

    # two relations over the same CSC draw different edges (keys mixed per edge type)
    twin = {CITES: GRAPH[CITES], ("b", "cites_too", "b"): GRAPH[CITES]}
    s = HeteroNeighborSampler(["b"], {"b": 30}, twin, [2])
    out = s.sample_from_nodes(SamplerInput(np.arange(30), np.arange(30), 0, input_type="b"))
    assert not np.array_equal(out.edge[CITES], out.edge[("b", "cites_too", "b")])


def test_disjoint_trees():
    seeds = [3, 17, 3, 0]
    out = run(sampler([3, 2], disjoint=True), seeds)
    assert out.batch is not None
    np.testing.assert_array_equal(out.batch["a"][:4], np.arange(4))
    for edge_type in EDGE_TYPES:
        src, _, dst = edge_type
        np.testing.assert_array_equal(
            out.batch[src][out.row[edge_type]], out.batch[dst][out.col[edge_type]]
        )
    for t in NUM_NODES:  # each node once per tree
        pairs = np.stack([out.node[t], out.batch[t]], axis=1)
        assert np.unique(pairs, axis=0).shape[0] == pairs.shape[0]
    check_counts(out, 2, "a")
    check_edges_exist(out, GRAPH)
    replay(out, GRAPH, every([3, 2]), seeds, "a")


def node_times(seed=1):
    rng = np.random.default_rng(seed)
    return {t: rng.integers(0, 100, n) for t, n in NUM_NODES.items()}


@pytest.mark.parametrize("strategy", ["uniform", "last"])
@pytest.mark.parametrize("given_time", [False, True], ids=["node-time", "input-time"])
def test_temporal_node_time(strategy, given_time):
    times = node_times()
    del times["c"]  # edges out of 'c' are not limited by time
    s = sampler([3, 2], node_time=times, temporal_strategy=strategy)
    seeds = np.array(SEEDS["b"])
    seed_time = np.array([40, 70, 90]) if given_time else None
    out = run(s, seeds, input_type="b", time=seed_time)
    expected_time = seed_time if given_time else times["b"][seeds]
    np.testing.assert_array_equal(out.seed_time, seed_time)  # as PyG: given times only
    assert out.batch is not None  # temporal implies disjoint

    def time_of(edge_type, e):
        src = edge_type[0]
        return times[src][GRAPH[edge_type][1][e]] if src in times else -np.inf

    def eligible(edge_type, j, e):
        return time_of(edge_type, e) <= expected_time[out.batch[edge_type[2]][j]]

    for edge_type in EDGE_TYPES:
        src, _, dst = edge_type
        if src in times:
            limit = expected_time[out.batch[dst][out.col[edge_type]]]
            assert np.all(times[src][out.node[src][out.row[edge_type]]] <= limit)
    replay(out, GRAPH, every([3, 2]), seeds, "b", eligible=eligible)
    assert out.row[IN].shape[0] > 0  # the untimed type is sampled too


def test_temporal_edge_time_last_takes_latest():
    rng = np.random.default_rng(2)
    # distinct times, so the most recent edges are well defined
    edge_time = {e: rng.permutation(GRAPH[e][1].shape[0]) for e in EDGE_TYPES}
    seeds = np.array(SEEDS["a"])
    seed_time = np.full(seeds.shape[0], 10**6)
    seed_time[:2] = [30, 60]
    for strategy in ("uniform", "last"):
        s = sampler([2, 2], edge_time=edge_time, temporal_strategy=strategy)
        out = run(s, seeds, time=seed_time)
        for edge_type in EDGE_TYPES:
            limit = seed_time[out.batch[edge_type[2]][out.col[edge_type]]]
            assert np.all(edge_time[edge_type][out.edge[edge_type]] <= limit)

        def eligible(edge_type, j, e, out=out):
            return edge_time[edge_type][e] <= seed_time[out.batch[edge_type[2]][j]]

        def pick_last(edge_type, candidates, fanout):
            ordered = sorted(candidates, key=lambda e: edge_time[edge_type][e])
            return set(ordered[-fanout:]) if fanout > 0 and ordered else set()

        replay(
            out,
            GRAPH,
            every([2, 2]),
            seeds,
            "a",
            eligible=eligible,
            pick_last=pick_last if strategy == "last" else None,
        )


@pytest.mark.parametrize("replace", [False, True], ids=["no-replace", "replace"])
def test_weighted_never_draws_zero_weight(replace):
    rng = np.random.default_rng(3)
    weights = {}
    for edge_type in [WRITES, CITES, TO]:  # REV_WRITES and IN stay uniform
        w = rng.random(GRAPH[edge_type][1].shape[0])
        w[rng.random(w.shape[0]) < 0.5] = 0.0
        weights[edge_type] = w
    s = sampler([3, 3], weights=weights, replace=replace)
    for seed in range(4):
        out = run(s, SEEDS["a"], seed=seed)
        for edge_type, w in weights.items():
            assert np.all(w[out.edge[edge_type]] > 0)

        def eligible(edge_type, j, e):
            return edge_type not in weights or weights[edge_type][e] > 0

        replay(
            out,
            GRAPH,
            every([3, 3]),
            SEEDS["a"],
            "a",
            replace=replace,
            eligible=eligible,
        )


@pytest.mark.parametrize("disjoint", [False, True], ids=["shared", "disjoint"])
def test_induced_equals_brute_force(disjoint):
    directional = run(sampler([2, 2], disjoint=disjoint), SEEDS["c"], input_type="c")
    out = run(
        sampler([2, 2], disjoint=disjoint, subgraph_type="induced"), SEEDS["c"], input_type="c"
    )
    assert out.num_sampled_nodes is None and out.num_sampled_edges is None
    for t in NUM_NODES:
        np.testing.assert_array_equal(out.node[t], directional.node[t])
    check_edges_exist(out, GRAPH)
    for edge_type, (indptr, indices) in GRAPH.items():
        src, _, dst = edge_type
        expected = set()
        for c, v in enumerate(out.node[dst]):
            for e in range(indptr[v], indptr[v + 1]):
                for r in np.flatnonzero(out.node[src] == indices[e]):
                    if disjoint and out.batch[src][r] != out.batch[dst][c]:
                        continue
                    expected.add((int(r), c, e))
        got = set(
            zip(
                out.row[edge_type].tolist(),
                out.col[edge_type].tolist(),
                out.edge[edge_type].tolist(),
                strict=True,
            )
        )
        assert got == expected, edge_type
        assert len(got) == out.row[edge_type].shape[0]
        assert len(got) >= directional.row[edge_type].shape[0]


def pairs(row, col):
    return set(zip(row.tolist(), col.tolist(), strict=True))


def test_bidirectional_follows_pyg_rules():
    directional = run(sampler([3, 2]), SEEDS["a"])
    out = run(sampler([3, 2], subgraph_type="bidirectional"), SEEDS["a"])
    assert out.num_sampled_nodes is None and out.num_sampled_edges is None
    for t in NUM_NODES:
        np.testing.assert_array_equal(out.node[t], directional.node[t])

    def sampled(edge_type):
        return pairs(directional.row[edge_type], directional.col[edge_type])

    def reversed_(edge_type):
        return {(c, r) for r, c in sampled(edge_type)}

    expected = {
        WRITES: sampled(WRITES) | reversed_(REV_WRITES),
        REV_WRITES: sampled(REV_WRITES) | reversed_(WRITES),
        CITES: sampled(CITES) | reversed_(CITES),
        IN: sampled(IN) | reversed_(TO),
        TO: sampled(TO) | reversed_(IN),
    }
    for edge_type in EDGE_TYPES:
        row, col = out.row[edge_type], out.col[edge_type]
        assert pairs(row, col) == expected[edge_type], edge_type
        assert len(pairs(row, col)) == row.shape[0]  # each pair once
        # sorted by destination then source; the written reverse type by source then destination
        order = np.lexsort((col, row)) if edge_type == REV_WRITES else np.lexsort((row, col))
        np.testing.assert_array_equal(order, np.arange(row.shape[0]))
        assert out.edge[edge_type] is None  # as PyG: merged types lose their edge ids
    # the reverse type holds the merged edges reversed (PyG writes both)
    np.testing.assert_array_equal(out.row[REV_WRITES], out.col[WRITES])
    np.testing.assert_array_equal(out.col[REV_WRITES], out.row[WRITES])


def test_bidirectional_equals_pyg_to_bidirectional():
    """The same edges as PyG's own ``HeteroSamplerOutput.to_bidirectional`` on the
    directional sample, in the same order."""
    torch = pytest.importorskip("torch")
    pyg_sampler = pytest.importorskip("torch_geometric.sampler")
    directional = run(sampler([3, 2]), SEEDS["b"], input_type="b")
    out = run(sampler([3, 2], subgraph_type="bidirectional"), SEEDS["b"], input_type="b")

    def tensors(arrays):
        return {k: torch.from_numpy(v.copy()) for k, v in arrays.items()}

    expected = pyg_sampler.HeteroSamplerOutput(
        node=tensors(directional.node),
        row=tensors(directional.row),
        col=tensors(directional.col),
        edge=tensors(directional.edge),
    ).to_bidirectional()
    for edge_type in EDGE_TYPES:
        np.testing.assert_array_equal(out.row[edge_type], expected.row[edge_type].numpy())
        np.testing.assert_array_equal(out.col[edge_type], expected.col[edge_type].numpy())
        assert out.edge[edge_type] is None and expected.edge[edge_type] is None


def test_bidirectional_warns_without_reverse_type():
    likes = ("c", "likes", "b")
    csc = dict(GRAPH)
    csc[likes] = csc_from_coo(np.arange(20) % 25, np.arange(20) % 30, 30)
    with pytest.warns(UserWarning, match="does not seem to have a reverse edge type"):
        s = sampler([2, 2], csc=csc, subgraph_type="bidirectional")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = run(s, SEEDS["b"], input_type="b")
    assert out.edge[likes] is not None  # left as sampled
    directional = run(sampler([2, 2], csc=csc), SEEDS["b"], input_type="b")
    np.testing.assert_array_equal(out.edge[likes], directional.edge[likes])


def test_merge_reverse():
    row, col, edge = merge_reverse(
        np.array([0, 2, 0]), np.array([1, 1, 1]), np.array([1]), np.array([5])
    )
    assert edge is None
    np.testing.assert_array_equal(row, [0, 2, 5])
    np.testing.assert_array_equal(col, [1, 1, 1])


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"replace": True},
        {"disjoint": True},
        {"weighted": True},
        {"timed": True},
        {"subgraph_type": "induced"},
    ],
    ids=["uniform", "replace", "disjoint", "weighted", "temporal", "induced"],
)
def test_same_across_thread_counts(kwargs):
    kwargs = dict(kwargs)
    if kwargs.pop("weighted", False):
        rng = np.random.default_rng(4)
        kwargs["weights"] = {e: rng.random(GRAPH[e][1].shape[0]) for e in EDGE_TYPES}
    if kwargs.pop("timed", False):
        kwargs["node_time"] = node_times()
    s = sampler([4, 3], **kwargs)
    seeds = np.arange(NUM_NODES["a"])
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = run(s, seeds, seed=9)
        numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
        two = run(s, seeds, seed=9)
    finally:
        numba.set_num_threads(before)
    assert_same(one, two)
    threaded = sampler([4, 3], num_threads=1, **kwargs)
    assert_same(one, run(threaded, seeds, seed=9))


HOMOGENEOUS = [
    pytest.param({}, id="uniform"),
    pytest.param({"replace": True}, id="replace"),
    pytest.param({"disjoint": True}, id="disjoint"),
    pytest.param({"subgraph_type": "induced"}, id="induced"),
    pytest.param({"subgraph_type": "bidirectional"}, id="bidirectional"),
    pytest.param({"weights": True}, id="weighted"),
    pytest.param({"node_time": True}, id="node-time"),
    pytest.param({"edge_time": True, "temporal_strategy": "last"}, id="edge-time-last"),
]


@pytest.mark.parametrize("kwargs", HOMOGENEOUS)
def test_homogeneous_graph_matches_neighbor_sampler(kwargs, id_map):
    indptr, indices = random_csc(120, 900, 5, np.int64)
    rng = np.random.default_rng(6)
    plain, typed = dict(kwargs), dict(kwargs)
    edge_type = ("n", "to", "n")
    if "weights" in kwargs:
        plain["weights"] = rng.random(indices.shape[0])
        typed["weights"] = {edge_type: plain["weights"]}
    if "node_time" in kwargs:
        plain["node_time"] = rng.integers(0, 50, 120)
        typed["node_time"] = {"n": plain["node_time"]}
    if "edge_time" in kwargs:
        plain["edge_time"] = rng.integers(0, 50, indices.shape[0])
        typed["edge_time"] = {edge_type: plain["edge_time"]}
    seeds = np.array([5, 9, 5, 77, 0, 119])
    time = np.array([10, 20, 30, 40, 50, 60]) if "edge_time" in kwargs else None
    ref = NeighborSampler(indptr, indices, [4, 3, 2], **plain).sample_from_nodes(
        SamplerInput(seeds, np.arange(6), 13, time=time)
    )
    hetero = HeteroNeighborSampler(
        ["n"], {"n": 120}, {edge_type: (indptr, indices)}, [4, 3, 2], **typed
    )
    out = hetero.sample_from_nodes(SamplerInput(seeds, np.arange(6), 13, time=time, input_type="n"))
    np.testing.assert_array_equal(out.node["n"], ref.node)
    np.testing.assert_array_equal(out.row[edge_type], ref.row)
    np.testing.assert_array_equal(out.col[edge_type], ref.col)
    if kwargs.get("subgraph_type") == "bidirectional":
        assert out.edge[edge_type] is None  # PyG drops merged types' edge ids
    else:
        np.testing.assert_array_equal(out.edge[edge_type], ref.edge)
    if ref.num_sampled_nodes is None:
        assert out.num_sampled_nodes is None and out.num_sampled_edges is None
    else:
        assert out.num_sampled_nodes == {"n": ref.num_sampled_nodes}
        assert out.num_sampled_edges == {edge_type: ref.num_sampled_edges}
    if ref.batch is None:
        assert out.batch is None
    else:
        np.testing.assert_array_equal(out.batch["n"], ref.batch)
    if ref.seed_time is not None:
        np.testing.assert_array_equal(out.seed_time, ref.seed_time)


def test_no_hops_and_empty_batch():
    out = run(sampler([]), SEEDS["a"])
    np.testing.assert_array_equal(out.node["a"], SEEDS["a"])
    assert out.num_sampled_nodes == {"a": (5,), "b": (0,), "c": (0,)}
    assert all(out.row[e].shape == (0,) for e in EDGE_TYPES)
    empty = run(sampler([2, 2]), [])
    assert all(empty.node[t].shape == (0,) for t in NUM_NODES)
    assert empty.num_sampled_edges == {e: (0, 0) for e in EDGE_TYPES}


def test_larger_batch_grows_tables(id_map):
    num_nodes = {"u": 5000, "v": 3000}
    rng = np.random.default_rng(8)
    csc = {
        ("u", "r", "v"): csc_from_coo(
            rng.integers(0, 5000, 40000), rng.integers(0, 3000, 40000), 3000
        ),
        ("v", "s", "u"): csc_from_coo(
            rng.integers(0, 3000, 40000), rng.integers(0, 5000, 40000), 5000
        ),
    }
    s = HeteroNeighborSampler(["u", "v"], num_nodes, csc, [10, 10])
    seeds = rng.choice(5000, 300, replace=False)
    for _ in range(2):  # the second batch starts from the first's table sizes
        out = s.sample_from_nodes(SamplerInput(seeds, np.arange(300), 1, input_type="u"))
        for t in num_nodes:
            assert np.unique(out.node[t]).shape[0] == out.node[t].shape[0]
            assert out.node[t].shape[0] > 1024
        for edge_type, (_, indices) in csc.items():
            src = edge_type[0]
            np.testing.assert_array_equal(
                indices[out.edge[edge_type]], out.node[src][out.row[edge_type]]
            )


def bad(match, exc=ValueError, **kwargs):
    args = {
        "node_types": list(NUM_NODES),
        "num_nodes": NUM_NODES,
        "csc": GRAPH,
        "num_neighbors": [2, 2],
    }
    args.update(kwargs)
    with pytest.raises(exc, match=match):
        HeteroNeighborSampler(**args)


def test_constructor_errors():
    bad("hops must be the same across all", num_neighbors={WRITES: [2, 2], CITES: [1]})
    bad("does not have", num_neighbors={("a", "nope", "b"): [2]})
    bad("entries must be ints >= -1", num_neighbors=[2, -3])
    bad("entries must be ints >= -1", num_neighbors={WRITES: [2, -2]})
    bad("must have exactly the node types", num_nodes={"a": 40, "b": 30})
    bad("must be an int >= 0", num_nodes={"a": 40, "b": -1, "c": 25})
    bad("must be distinct", node_types=["a", "b", "a"])
    bad("names node type 'z'", csc={("z", "r", "a"): GRAPH[IN]})
    bad("tuple of strings", csc={("a", "b"): GRAPH[IN]})
    indptr, indices = GRAPH[WRITES]
    bad("entries", csc={WRITES: (indptr[:-1], indices)})
    bad(r"must lie in \[0, 40\)", csc={WRITES: (indptr, indices + 20)})
    bad("int64", TypeError, csc={WRITES: (indptr.astype(np.int32), indices)})
    falling = indptr.copy()
    falling[5] = indptr[-1]
    bad("non-decreasing", csc={WRITES: (falling, indices)})
    bad("not both", node_time=node_times(), edge_time={WRITES: np.zeros(indices.size, np.int64)})
    bad("induced", node_time=node_times(), subgraph_type="induced")
    bad("subgraph_type", subgraph_type="both")
    bad("temporal_strategy", temporal_strategy="first")
    bad("shape", node_time={"a": np.zeros(3, np.int64)})
    bad("integer times", TypeError, node_time={"a": np.zeros(40)})
    bad("finite and >= 0", weights={WRITES: -np.ones(indices.size)})
    bad("does not have", weights={("a", "x", "b"): np.ones(3)})
    bad("num_threads", num_threads=0)


def test_sample_errors():
    s = sampler([2])
    with pytest.raises(ValueError, match="input_type"):
        run(s, [1], input_type=None)
    with pytest.raises(ValueError, match="not a node type"):
        run(s, [1], input_type="z")
    with pytest.raises(ValueError, match=r"outside \[0, 30\)"):
        run(s, [30], input_type="b")
    with pytest.raises(ValueError, match="does not sample by time"):
        run(s, [1], time=np.array([3]))
    timed = sampler([2], edge_time={WRITES: np.zeros(GRAPH[WRITES][1].size, np.int64)})
    with pytest.raises(ValueError, match="needs each seed's time"):
        run(timed, [1])
    with pytest.raises(ValueError, match="shape"):
        run(timed, [1, 2], time=np.array([3]))
