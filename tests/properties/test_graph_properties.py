"""Property tests of the graph store's constructors over generated edge lists and scipy
matrices, valid and malformed: every call returns a CSC graph that holds exactly the input's
edges, checked against scipy, or raises ``ValueError``/``TypeError`` naming the argument."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from graphengine.data.graph_store import Graph

SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def edge_lists(draw, max_nodes=30, max_edges=120):
    """``(row, col, num_nodes)``: int64 edges among ``num_nodes`` nodes, in any order,
    multi-edges and self-loops allowed, isolated nodes likely."""
    num_nodes = draw(st.integers(0, max_nodes))
    num_edges = draw(st.integers(0, max_edges)) if num_nodes else 0
    ids = st.integers(0, max(num_nodes - 1, 0))
    row = draw(hnp.arrays(np.int64, num_edges, elements=ids))
    col = draw(hnp.arrays(np.int64, num_edges, elements=ids))
    if draw(st.booleans()):
        col = np.sort(col)  # already destination-major: no edge-id permutation needed
    return row, col, num_nodes


def edge_counts(row, col, num_nodes) -> sp.csc_matrix:
    """The reference: how many times each edge ``row[i] -> col[i]`` occurs, as scipy counts it."""
    ones = np.ones(row.shape[0], dtype=np.int64)
    return sp.coo_matrix((ones, (row, col)), shape=(num_nodes, num_nodes)).tocsc()


def assert_holds_edges(graph: Graph, row, col, num_nodes) -> None:
    """``graph`` is a valid CSC graph of ``num_nodes`` nodes whose column ``v`` holds the
    multiset of sources of the edges into ``v``, and whose ``edge_ids`` map each CSC
    position back to an input edge, keeping the input order within a column."""
    assert graph.num_nodes == num_nodes and graph.num_edges == row.shape[0]
    assert graph.indptr.dtype == np.int64 and graph.indices.dtype == np.int32
    Graph(graph.indptr, graph.indices, graph.edge_ids)  # the constructor's own checks pass
    ones = np.ones(graph.num_edges, dtype=np.int64)
    got = sp.csc_matrix((ones, graph.indices, graph.indptr), shape=(num_nodes, num_nodes))
    assert (got != edge_counts(row, col, num_nodes)).nnz == 0
    dst = np.repeat(np.arange(num_nodes), np.diff(graph.indptr))
    edge_ids = np.arange(graph.num_edges) if graph.edge_ids is None else graph.edge_ids
    np.testing.assert_array_equal(np.sort(edge_ids), np.arange(graph.num_edges))
    np.testing.assert_array_equal(row[edge_ids], graph.indices)
    np.testing.assert_array_equal(col[edge_ids], dst)
    for v in range(num_nodes):
        mine = edge_ids[graph.indptr[v] : graph.indptr[v + 1]]
        assert (np.diff(mine) > 0).all()  # a column keeps the input order of its edges
    np.testing.assert_array_equal(graph.to_edge_index().numpy(), np.stack([row, col]))


@SETTINGS
@given(
    edge_lists(),
    st.sampled_from([np.int32, np.int64]),
    st.sampled_from(["numpy", "torch"]),
    st.integers(0, 3),
    st.booleans(),
)
def test_from_edge_index_holds_every_edge(edges, dtype, kind, extra_nodes, give_num_nodes):
    """Any valid int32/int64 ``edge_index`` (array or tensor, ``num_nodes`` given or not) gives
    a CSC graph with scipy's edge counts per column, ``edge_ids`` mapping back to the input
    edges in input order, and ``to_edge_index`` giving the input back."""
    row, col, num_nodes = edges
    edge_index = np.stack([row, col]).astype(dtype)
    if kind == "torch":
        edge_index = torch.from_numpy(edge_index)
    if give_num_nodes:
        num_nodes += extra_nodes
        graph = Graph.from_edge_index(edge_index, num_nodes)
    else:
        num_nodes = int(max(row.max(), col.max())) + 1 if row.size else 0
        graph = Graph.from_edge_index(edge_index)
    assert graph.validated
    assert_holds_edges(graph, row, col, num_nodes)


@SETTINGS
@given(edge_lists(), st.data())
def test_malformed_edge_index_is_refused_by_name(edges, data):
    """Negative ids, ids ``>= num_nodes``, float or uint8 ids, a wrong shape and a bad
    ``num_nodes`` raise ``ValueError``/``TypeError`` naming ``'edge_index'`` or ``'num_nodes'``."""
    row, col, num_nodes = edges
    edge_index = np.stack([row, col])
    num_nodes_arg = num_nodes
    damage = data.draw(
        st.sampled_from(
            ["negative", "too-high", "float", "uint8", "rank-1", "three-rows", "num_nodes"]
        )
    )
    if damage in ("negative", "too-high"):
        if not row.size:
            edge_index = np.zeros((2, 1), dtype=np.int64)
        at = (data.draw(st.integers(0, 1)), data.draw(st.integers(0, edge_index.shape[1] - 1)))
        edge_index[at] = -data.draw(st.integers(1, 5)) if damage == "negative" else num_nodes
    elif damage == "float":
        edge_index = edge_index.astype(np.float64)
    elif damage == "uint8":
        edge_index = edge_index.astype(np.uint8)
    elif damage == "rank-1":
        edge_index = edge_index.reshape(-1)
    elif damage == "three-rows":
        edge_index = np.concatenate([edge_index, edge_index[:1]])
    else:
        num_nodes_arg = data.draw(st.sampled_from([-1, 2.0, True, "3", None]))
        if num_nodes_arg is None:  # too few nodes for the ids, where there are ids
            if not row.size:
                return
            num_nodes_arg = int(max(row.max(), col.max()))
    with pytest.raises((ValueError, TypeError), match=r"'edge_index'|'num_nodes'"):
        Graph.from_edge_index(edge_index, num_nodes_arg)


# Formats built from their index arrays keep repeated entries (a non-canonical matrix);
# those built from coordinates hold each coordinate once (scipy sums repeats).
FROM_ARRAYS = {"csr": sp.csr_matrix, "csc": sp.csc_matrix, "csr_array": sp.csr_array}
FROM_COORDS = {"coo": sp.coo_matrix, "coo_array": sp.coo_array, "lil": sp.lil_matrix}


@SETTINGS
@given(edge_lists(), st.sampled_from(sorted(FROM_ARRAYS) + sorted(FROM_COORDS)), st.booleans())
def test_from_scipy_holds_every_entry(edges, fmt, zeros):
    """A square matrix in any format gives a graph whose column ``j`` holds the sources ``i``
    of the matrix's stored entries ``(i, j)`` (explicit zeros and repeated entries of a
    non-canonical CSR/CSC included), as scipy counts them."""
    row, col, num_nodes = edges
    shape = (num_nodes, num_nodes)
    # Explicit zeros are edges too (LIL cannot hold them).
    zeros = zeros and fmt != "lil"
    data = np.zeros(row.shape[0]) if zeros else np.arange(1.0, row.shape[0] + 1)
    if fmt in FROM_ARRAYS:
        major, minor = (col, row) if fmt == "csc" else (row, col)
        order = np.argsort(major, kind="stable")
        indptr = np.zeros(num_nodes + 1, dtype=np.int64)
        np.cumsum(np.bincount(major, minlength=num_nodes), out=indptr[1:])
        matrix = FROM_ARRAYS[fmt]((data[order], minor[order], indptr), shape=shape)
    else:
        matrix = FROM_COORDS[fmt](sp.coo_matrix((data, (row, col)), shape=shape))
        pairs = np.unique(np.stack([row, col]), axis=1)
        row, col = pairs[0], pairs[1]
    graph = Graph.from_scipy(matrix)
    assert graph.validated and graph.num_nodes == num_nodes and graph.num_edges == row.shape[0]
    assert graph.indptr.dtype == np.int64 and graph.indices.dtype == np.int32
    ones = np.ones(graph.num_edges, dtype=np.int64)
    got = sp.csc_matrix((ones, graph.indices, graph.indptr), shape=shape)
    assert (got != edge_counts(row, col, num_nodes)).nnz == 0


@SETTINGS
@given(edge_lists(), st.data())
def test_malformed_scipy_matrix_is_refused_by_name(edges, data):
    """A dense array, a non-square matrix, or index arrays edited out of range or out of order
    after construction raise ``ValueError``/``TypeError`` naming ``'matrix'``."""
    row, col, num_nodes = edges
    matrix = sp.csr_matrix((np.ones(row.shape[0]), (row, col)), shape=(num_nodes, num_nodes))
    damage = data.draw(st.sampled_from(["dense", "non-square", "index", "indptr", "coo-index"]))
    if damage == "dense":
        matrix = matrix.toarray()
    elif damage == "non-square":
        matrix = sp.csr_matrix((num_nodes, num_nodes + data.draw(st.integers(1, 3))))
    elif damage == "index" and matrix.nnz:
        at = data.draw(st.integers(0, matrix.nnz - 1))
        matrix.indices[at] = data.draw(st.sampled_from([-1, num_nodes, num_nodes + 7]))
    elif damage == "indptr" and matrix.nnz and num_nodes > 1:
        matrix.indptr[data.draw(st.integers(1, num_nodes - 1))] = matrix.nnz + 1
    elif damage == "coo-index" and matrix.nnz:
        matrix = matrix.tocoo()
        axis = matrix.row if data.draw(st.booleans()) else matrix.col
        bad = data.draw(st.sampled_from([-3, num_nodes]))
        axis[data.draw(st.integers(0, matrix.nnz - 1))] = bad
    else:
        return  # nothing to damage in this matrix
    with pytest.raises((ValueError, TypeError), match="'matrix'"):
        Graph.from_scipy(matrix)
