"""Property tests of the samplers over generated graphs, seeds and options: every call returns
a batch that satisfies PyG's invariants, checked against the graph itself, or raises
``ValueError``/``TypeError`` naming the argument; never a crash or a wrong batch."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from samplers import NeighborSampler, SamplerInput

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def csc_graphs(draw, max_nodes=40, max_edges=200):
    """A CSC graph (indptr int64, indices int32 or int64), multi-edges and self-loops
    allowed, isolated nodes likely."""
    num_nodes = draw(st.integers(1, max_nodes))
    num_edges = draw(st.integers(0, max_edges))
    dst = np.sort(draw(hnp.arrays(np.int64, num_edges, elements=st.integers(0, num_nodes - 1))))
    src = draw(hnp.arrays(np.int64, num_edges, elements=st.integers(0, num_nodes - 1)))
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=num_nodes), out=indptr[1:])
    return indptr, src.astype(draw(st.sampled_from([np.int32, np.int64])))


@st.composite
def batches(draw):
    indptr, indices = draw(csc_graphs())
    num_nodes = indptr.shape[0] - 1
    seeds = draw(hnp.arrays(np.int64, st.integers(1, 8), elements=st.integers(0, num_nodes - 1)))
    fanouts = draw(st.lists(st.integers(-1, 4), min_size=1, max_size=3))
    options = {"replace": draw(st.booleans()), "disjoint": draw(st.booleans())}
    return indptr, indices, seeds, fanouts, options, draw(st.integers(0, 2**63))


@SETTINGS
@given(batches())
def test_every_batch_holds_edges_of_the_graph_within_the_fanouts(batch):
    indptr, indices, seeds, fanouts, options, seed = batch
    sampler = NeighborSampler(indptr, indices, fanouts, **options)
    out = sampler.sample_from_nodes(SamplerInput(seeds, np.arange(len(seeds)), seed=seed))
    num_nodes = indptr.shape[0] - 1
    node, row, col, edge = out.node, out.row, out.col, out.edge
    np.testing.assert_array_equal(node[: len(seeds)], seeds)
    assert ((node >= 0) & (node < num_nodes)).all()
    assert ((row >= 0) & (row < len(node)) & (col >= 0) & (col < len(node))).all()
    # Each edge is the graph's edge at its CSC position: from node[row] into node[col].
    dst = node[col]
    assert ((edge >= indptr[dst]) & (edge < indptr[dst + 1])).all()
    np.testing.assert_array_equal(indices[edge], node[row])
    # Per hop: the counts add up, and each destination gets what its fanout allows.
    assert sum(out.num_sampled_edges) == len(edge) and sum(out.num_sampled_nodes) == len(node)
    if not options["disjoint"]:
        assert len(np.unique(node[len(seeds) :])) == len(node) - len(seeds)
    start = 0
    for fanout, count in zip(fanouts, out.num_sampled_edges, strict=True):
        hop_col, hop_edge = col[start : start + count], edge[start : start + count]
        start += count
        for c in np.unique(hop_col):
            mine = hop_edge[hop_col == c]
            degree = indptr[node[c] + 1] - indptr[node[c]]
            if fanout < 0:
                assert len(mine) == degree
            elif options["replace"]:
                assert len(mine) == fanout
            else:
                assert len(mine) == min(fanout, degree) and len(np.unique(mine)) == len(mine)
    if options["disjoint"]:
        assert ((out.batch >= 0) & (out.batch < len(seeds))).all()
        np.testing.assert_array_equal(out.batch[col], out.batch[row])  # edges stay in a tree


@SETTINGS
@given(
    csc_graphs(),
    st.one_of(
        hnp.arrays(np.int64, st.integers(1, 5), elements=st.integers(-5, 100)),
        hnp.arrays(np.float64, st.integers(1, 5), elements=st.floats(0, 10)),
        hnp.arrays(np.int64, (2, 2), elements=st.integers(0, 0)),
    ),
)
def test_bad_seeds_are_refused_by_name(graph, seeds):
    indptr, indices = graph
    num_nodes = indptr.shape[0] - 1
    sampler = NeighborSampler(indptr, indices, [2])
    inputs = SamplerInput(seeds, np.arange(seeds.shape[0]), seed=0)
    valid = (
        seeds.ndim == 1
        and np.issubdtype(seeds.dtype, np.integer)
        and ((seeds >= 0) & (seeds < num_nodes)).all()
    )
    if valid:
        assert sampler.sample_from_nodes(inputs).batch_size == seeds.shape[0]
    else:
        with pytest.raises((ValueError, TypeError), match="'node'"):
            sampler.sample_from_nodes(inputs)


@SETTINGS
@given(csc_graphs(), st.data())
def test_malformed_csc_is_refused(graph, data):
    indptr, indices = graph
    indptr, indices = indptr.copy(), indices.copy()
    damage = data.draw(st.sampled_from(["decreasing", "end", "index", "float"]))
    if damage == "decreasing" and indptr.shape[0] > 2 and indptr[-1] > 0:
        i = data.draw(st.integers(1, indptr.shape[0] - 2))
        indptr[i] = indptr[-1] + 1
    elif damage == "end":
        indptr[-1] += data.draw(st.integers(1, 5))
    elif damage == "index" and indices.shape[0]:
        indices[data.draw(st.integers(0, indices.shape[0] - 1))] = -1
    elif damage == "float":
        indices = indices.astype(np.float64)
    else:
        return  # nothing to damage in this graph
    with pytest.raises((ValueError, TypeError), match=r"indptr|indices"):
        NeighborSampler(indptr, indices, [2])
