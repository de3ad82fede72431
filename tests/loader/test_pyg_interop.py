"""PyG interop (graphengine.loader.pyg_interop): reading a PyG (FeatureStore, GraphStore) pair
as CSC arrays, gathering batches from it, and running a user's PyG sampler through our stages.

References are independent of the code under test: scipy's CSC of the stored edges, feature
tables that equal node ids (so ``x`` must equal ``n_id``), the original edge list indexed by
``e_id``, and PyG's own ``NodeLoader`` (its ``filter_fn``) over the same sampler output.
"""

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from torch_geometric.data import Data, HeteroData
from torch_geometric.loader import NodeLoader
from torch_geometric.loader.utils import filter_data
from torch_geometric.sampler import BaseSampler as PyGBaseSampler
from torch_geometric.sampler import HeteroSamplerOutput as PyGHeteroSamplerOutput
from torch_geometric.sampler import SamplerOutput as PyGSamplerOutput
from torch_geometric.testing import MyFeatureStore, MyGraphStore

from graphengine.loader.pyg_interop import (
    GatherPyGOutput,
    GatherRemoteFeatures,
    PyGRemoteGraph,
    SamplePyGNodes,
    check_store_pair,
)
from graphengine.loader.seeds import BatchRequest
from samplers import NeighborSampler, SamplerInput, SamplerOutput
from samplers.base import HeteroSamplerOutput
from tests.helpers.pyg_stores import (
    AUTHOR,
    CITES,
    NUM,
    PAPER,
    WRITES,
    WRITTEN,
    hetero_stores,
    homogeneous_stores,
    random_edges,
)


def check_csc_against_scipy(csc, row, col, num_src, num_dst):
    """``csc`` holds exactly the edges (row, col), and ``edge_ids()`` maps each CSC position
    to the original edge."""
    matrix = sp.coo_matrix((np.ones(len(row)), (row, col)), shape=(num_src, num_dst)).tocsc()
    matrix.sort_indices()
    assert csc.indptr.dtype == np.int64 and csc.indices.dtype == np.int64
    np.testing.assert_array_equal(csc.indptr, matrix.indptr)
    dst = np.repeat(np.arange(num_dst), np.diff(csc.indptr))
    order = np.lexsort((csc.indices, dst))  # sorted within each column, as scipy's
    np.testing.assert_array_equal(csc.indices[order], matrix.indices)
    ids = csc.edge_ids()
    np.testing.assert_array_equal(np.sort(ids), np.arange(len(row)))
    np.testing.assert_array_equal(row[ids], csc.indices)
    np.testing.assert_array_equal(col[ids], dst)


def assert_same_batch(ours, theirs):
    """Same attributes with equal values (tensors: equal dtype and values), per store."""
    assert type(ours) is type(theirs)
    ours_stores, their_stores = ours.stores, theirs.stores
    assert [s._key for s in ours_stores] == [s._key for s in their_stores]
    for mine, other in zip(ours_stores, their_stores, strict=True):
        assert sorted(mine.keys()) == sorted(other.keys()), mine._key
        for key in mine:
            a, b = mine[key], other[key]
            if isinstance(b, torch.Tensor):
                assert a.dtype == b.dtype and torch.equal(a, b), (mine._key, key)
            else:
                assert a == b, (mine._key, key)


# A brute-force one-hop sampler on our side (NumPy outputs) ####################


def full_one_hop(csc, seeds, input_id):
    """Every in-edge of every seed (distinct seeds), as our SamplerOutput."""
    positions = np.concatenate(
        [np.arange(csc.indptr[s], csc.indptr[s + 1]) for s in seeds] or [np.zeros(0, np.int64)]
    ).astype(np.int64)
    col_global = np.concatenate(
        [np.full(csc.indptr[s + 1] - csc.indptr[s], s) for s in seeds]
    ).astype(np.int64)
    node = list(seeds)
    local = {int(v): i for i, v in enumerate(seeds)}
    for src in csc.indices[positions]:
        if int(src) not in local:
            local[int(src)] = len(node)
            node.append(int(src))
    return SamplerOutput(
        node=np.asarray(node, dtype=np.int64),
        row=np.asarray([local[int(v)] for v in csc.indices[positions]], dtype=np.int64),
        col=np.asarray([local[int(v)] for v in col_global], dtype=np.int64),
        edge=positions,
        num_sampled_nodes=(len(seeds), len(node) - len(seeds)),
        num_sampled_edges=(len(positions),),
        batch_size=len(seeds),
        input_id=np.asarray(input_id, dtype=np.int64),
    )


def full_one_hop_hetero(graph, seeds, input_id):
    """Every in-edge of every ``paper`` seed over all edge types, as our HeteroSamplerOutput."""
    node = {t: [] for t in graph.node_types}
    local = {t: {} for t in graph.node_types}

    def add(node_type, v):
        if v not in local[node_type]:
            local[node_type][v] = len(node[node_type])
            node[node_type].append(v)
        return local[node_type][v]

    for s in seeds:
        add(PAPER, int(s))
    rows, cols, edges = {}, {}, {}
    for edge_type in graph.edge_types:
        csc = graph.csc(edge_type)
        r, c, e = [], [], []
        if edge_type[2] == PAPER:
            for s in seeds:
                for p in range(csc.indptr[s], csc.indptr[s + 1]):
                    r.append(add(edge_type[0], int(csc.indices[p])))
                    c.append(local[PAPER][int(s)])
                    e.append(p)
        rows[edge_type], cols[edge_type], edges[edge_type] = (
            np.asarray(x, dtype=np.int64) for x in (r, c, e)
        )
    return HeteroSamplerOutput(
        node={t: np.asarray(v, dtype=np.int64) for t, v in node.items()},
        row=rows,
        col=cols,
        edge=edges,
        num_sampled_nodes={
            t: (len(seeds) if t == PAPER else 0, len(v) - (len(seeds) if t == PAPER else 0))
            for t, v in node.items()
        },
        num_sampled_edges={et: (len(e),) for et, e in edges.items()},
        batch_size=len(seeds),
        input_id=np.asarray(input_id, dtype=np.int64),
        input_type=PAPER,
    )


class AsPyGSampler(PyGBaseSampler):
    """Our NumPy output, converted by hand to PyG's, so PyG's NodeLoader can gather it."""

    def __init__(self, sample, edge_permutation):
        self.sample = sample
        self._perm = edge_permutation

    @property
    def edge_permutation(self):
        return self._perm

    def sample_from_nodes(self, inputs, **kwargs):
        out = self.sample(inputs.node.numpy(), inputs.input_id.numpy())
        t = torch.from_numpy
        if isinstance(out, SamplerOutput):
            return PyGSamplerOutput(
                node=t(out.node),
                row=t(out.row),
                col=t(out.col),
                edge=t(out.edge),
                num_sampled_nodes=list(out.num_sampled_nodes),
                num_sampled_edges=list(out.num_sampled_edges),
                metadata=(inputs.input_id, inputs.time),
            )
        return PyGHeteroSamplerOutput(
            node={k: t(v) for k, v in out.node.items()},
            row={k: t(v) for k, v in out.row.items()},
            col={k: t(v) for k, v in out.col.items()},
            edge={k: t(v) for k, v in out.edge.items()},
            num_sampled_nodes={k: list(v) for k, v in out.num_sampled_nodes.items()},
            num_sampled_edges={k: list(v) for k, v in out.num_sampled_edges.items()},
            metadata=(inputs.input_id, inputs.time),
        )

    def sample_from_edges(self, index, neg_sampling=None):
        raise NotImplementedError


# Reading the graph ###########################################################


@pytest.mark.parametrize("layout", ["coo", "csr", "csc"])
def test_homogeneous_csc_equals_scipy(layout):
    feature_store, graph_store, (row, col) = homogeneous_stores(layout=layout, seed=1)
    graph = PyGRemoteGraph(feature_store, graph_store)
    assert not graph.is_hetero
    assert graph.node_types == [None] and graph.edge_types == [None]
    assert graph.num_nodes == 50
    csc = graph.csc()
    check_csc_against_scipy(csc, row, col, 50, 50)
    perm = graph_store.csc()[2]  # what PyG's NeighborSampler reads
    if perm is None:
        assert csc.perm is None and graph.edge_permutation is None
    else:
        assert torch.equal(graph.edge_permutation, perm)
    as_graph = graph.graph()
    np.testing.assert_array_equal(as_graph.indptr, csc.indptr)
    np.testing.assert_array_equal(as_graph.indices, csc.indices)


def test_homogeneous_without_size_counts_feature_rows():
    feature_store, graph_store, _ = homogeneous_stores(with_size=False, seed=2)
    # nodes 40..49 have no edges: the CSC of an unsized COO stops at the largest id
    feature_store.put_tensor(torch.arange(60), group_name=None, attr_name="x", index=None)
    feature_store.put_tensor(torch.arange(60) * 10, group_name=None, attr_name="y", index=None)
    graph = PyGRemoteGraph(feature_store, graph_store)
    assert graph.num_nodes == 60
    assert graph.csc().indptr.shape == (61,)
    assert graph.csc().indptr[-1] == 300


def test_hetero_csc_equals_scipy_and_counts():
    feature_store, graph_store, edges = hetero_stores()
    graph = PyGRemoteGraph(feature_store, graph_store)
    assert graph.is_hetero
    assert graph.node_types == [PAPER, AUTHOR]
    assert graph.edge_types == [WRITES, CITES, WRITTEN]
    assert graph.num_nodes == NUM
    _, _, perms = graph_store.csc()
    for edge_type, (row, col) in edges.items():
        csc = graph.csc(edge_type)
        assert (csc.num_src, csc.num_dst) == (NUM[edge_type[0]], NUM[edge_type[2]])
        check_csc_against_scipy(csc, row, col, csc.num_src, csc.num_dst)
        if perms[edge_type] is None:
            assert graph.edge_permutation[edge_type] is None
        else:
            assert torch.equal(graph.edge_permutation[edge_type], perms[edge_type])
    assert graph.graph(CITES).num_nodes == NUM[PAPER]
    with pytest.raises(ValueError, match="two node types"):
        graph.graph(WRITES)
    with pytest.raises(KeyError, match="no edge type"):
        graph.csc(None)


def test_bad_pairs_and_stores_are_refused():
    feature_store, graph_store, _ = homogeneous_stores()
    with pytest.raises(TypeError, match="FeatureStore first"):
        check_store_pair(({}, graph_store))
    with pytest.raises(TypeError, match="GraphStore second"):
        check_store_pair((feature_store, "edges"))
    with pytest.raises(TypeError, match="pair"):
        check_store_pair(feature_store)
    with pytest.raises(TypeError, match="FeatureStore first"):
        PyGRemoteGraph(graph_store, graph_store)
    with pytest.raises(ValueError, match="no edge index"):
        PyGRemoteGraph(feature_store, MyGraphStore())
    mixed = MyGraphStore()
    mixed.put_edge_index(
        (torch.tensor([0]), torch.tensor([1])), edge_type=None, layout="coo", size=(2, 2)
    )
    mixed.put_edge_index(
        (torch.tensor([0]), torch.tensor([1])), edge_type=CITES, layout="coo", size=(2, 2)
    )
    with pytest.raises(ValueError, match="mixes"):
        PyGRemoteGraph(feature_store, mixed)
    out_of_range = MyGraphStore()
    out_of_range.put_edge_index(
        (torch.tensor([0, 7]), torch.tensor([1, 1])), edge_type=None, layout="coo", size=(5, 5)
    )
    with pytest.raises(ValueError, match="outside"):
        PyGRemoteGraph(feature_store, out_of_range)
    csc = PyGRemoteGraph(feature_store, graph_store).csc()
    ours = NeighborSampler(csc.indptr, csc.indices, [2])
    with pytest.raises(TypeError, match="SampleNodes"):
        SamplePyGNodes(ours, torch.arange(3))
    with pytest.raises(ValueError, match="one entry per seed"):
        SamplePyGNodes(AsPyGSampler(None, None), torch.arange(3), input_ids=torch.arange(2))
    with pytest.raises(ValueError, match="input_type"):
        GatherPyGOutput(HeteroData())
    with pytest.raises(TypeError, match="HeteroData or a"):
        GatherPyGOutput(np.zeros(3))


# Gathering our outputs from a pair ###########################################


def test_gather_homogeneous_matches_pyg_node_loader():
    feature_store, graph_store, (row, col) = homogeneous_stores(seed=3)
    graph = PyGRemoteGraph(feature_store, graph_store)
    csc = graph.csc()
    seeds, input_id = np.array([4, 17, 0, 33]), np.array([0, 1, 2, 3])
    batch = GatherRemoteFeatures(graph)(full_one_hop(csc, seeds, input_id))

    assert isinstance(batch, Data)
    assert torch.equal(batch.x, batch.n_id)  # x = arange(num_nodes)
    assert torch.equal(batch.y, batch.n_id * 10)
    assert torch.equal(batch.n_id[:4], torch.from_numpy(seeds))
    src, dst = batch.n_id[batch.edge_index]
    assert torch.equal(src, torch.from_numpy(row)[batch.e_id])  # e_id = original edge ids
    assert torch.equal(dst, torch.from_numpy(col)[batch.e_id])
    assert int((np.isin(col, seeds)).sum()) == batch.e_id.numel()
    assert batch.batch_size == 4 and torch.equal(batch.input_id, torch.arange(4))
    assert batch.num_sampled_edges == [batch.e_id.numel()]

    pyg = AsPyGSampler(lambda n, i: full_one_hop(csc, n, i), graph.edge_permutation)
    loader = NodeLoader((feature_store, graph_store), pyg, input_nodes=torch.from_numpy(seeds))
    assert_same_batch(batch, loader(torch.arange(4)))


def test_gather_hetero_matches_pyg_node_loader():
    feature_store, graph_store, edges = hetero_stores(seed=5)
    graph = PyGRemoteGraph(feature_store, graph_store)
    seeds, input_id = np.array([3, 29, 11]), np.array([0, 1, 2])
    batch = GatherRemoteFeatures(graph)(full_one_hop_hetero(graph, seeds, input_id))

    assert isinstance(batch, HeteroData)
    for node_type in NUM:
        assert torch.equal(batch[node_type].x, batch[node_type].n_id)
    assert torch.equal(batch[PAPER].y, batch[PAPER].n_id * 10)
    for edge_type in (WRITES, CITES):
        row, col = (torch.from_numpy(a) for a in edges[edge_type])
        store = batch[edge_type]
        src = batch[edge_type[0]].n_id[store.edge_index[0]]
        dst = batch[edge_type[2]].n_id[store.edge_index[1]]
        assert torch.equal(src, row[store.e_id]) and torch.equal(dst, col[store.e_id])
        assert int(np.isin(edges[edge_type][1], seeds).sum()) == store.e_id.numel() > 0
    assert batch[WRITTEN].e_id.numel() == 0
    assert batch[PAPER].batch_size == 3
    assert torch.equal(batch[PAPER].input_id, torch.arange(3))
    assert "input_id" not in batch[AUTHOR]

    pyg = AsPyGSampler(lambda n, i: full_one_hop_hetero(graph, n, i), graph.edge_permutation)
    loader = NodeLoader(
        (feature_store, graph_store), pyg, input_nodes=(PAPER, torch.from_numpy(seeds))
    )
    assert_same_batch(batch, loader(torch.arange(3)))


def test_gather_carries_disjoint_batch_and_seed_time():
    feature_store, graph_store, _ = homogeneous_stores(seed=4)
    graph = PyGRemoteGraph(feature_store, graph_store)
    out = SamplerOutput(
        node=np.array([5, 6, 5], dtype=np.int64),
        row=np.array([1, 2], dtype=np.int64),
        col=np.array([0, 0], dtype=np.int64),
        edge=np.array([0, 1], dtype=np.int64),
        num_sampled_nodes=(1, 2),
        num_sampled_edges=(2,),
        batch_size=1,
        input_id=np.array([7], dtype=np.int64),
        batch=np.array([0, 0, 0], dtype=np.int64),
        seed_time=np.array([42], dtype=np.int64),
    )
    batch = GatherRemoteFeatures(graph)(out)
    assert torch.equal(batch.batch, torch.zeros(3, dtype=torch.long))
    assert torch.equal(batch.seed_time, torch.tensor([42]))
    assert torch.equal(batch.x, torch.tensor([5, 6, 5]))
    assert torch.equal(batch.e_id, graph.edge_permutation[:2])
    with pytest.raises(TypeError, match="typed edges"):
        GatherRemoteFeatures(PyGRemoteGraph(*hetero_stores()[:2]))(out)


def test_our_neighbor_sampler_over_a_pair():
    feature_store, graph_store, (row, col) = homogeneous_stores(seed=6)
    graph = PyGRemoteGraph(feature_store, graph_store)
    as_graph = graph.graph()
    sampler = NeighborSampler(as_graph.indptr, as_graph.indices, [3, 2])
    seeds = np.array([1, 2, 3], dtype=np.int64)
    out = sampler.sample_from_nodes(SamplerInput(node=seeds, input_id=np.arange(3), seed=9))
    batch = GatherRemoteFeatures(graph)(out)
    assert torch.equal(batch.x, batch.n_id)
    src, dst = batch.n_id[batch.edge_index]
    assert torch.equal(src, torch.from_numpy(row)[batch.e_id])
    assert torch.equal(dst, torch.from_numpy(col)[batch.e_id])


# A user's PyG sampler through our stages #####################################


class FullOneHop(PyGBaseSampler):
    """All in-edges of the seeds, by brute force in torch, over edges sorted by destination
    (so that ``edge_permutation`` matters)."""

    def __init__(self, edge_index, set_metadata=True):
        self.perm = torch.sort(edge_index[1], stable=True)[1]
        self.row, self.col = edge_index[:, self.perm]
        self.set_metadata = set_metadata

    @property
    def edge_permutation(self):
        return self.perm

    def sample_from_nodes(self, inputs, **kwargs):
        seeds = inputs.node
        edge = torch.isin(self.col, seeds).nonzero().view(-1)
        new = [int(v) for v in self.row[edge] if int(v) not in set(seeds.tolist())]
        node = torch.cat([seeds, torch.tensor(list(dict.fromkeys(new)), dtype=torch.long)])
        local = torch.full((int(node.max()) + 1,), -1, dtype=torch.long)
        local[node] = torch.arange(node.numel())
        return PyGSamplerOutput(
            node=node,
            row=local[self.row[edge]],
            col=local[self.col[edge]],
            edge=edge,
            num_sampled_nodes=[seeds.numel(), node.numel() - seeds.numel()],
            num_sampled_edges=[edge.numel()],
            metadata=(inputs.input_id, inputs.time) if self.set_metadata else None,
        )

    def sample_from_edges(self, index, neg_sampling=None):
        raise NotImplementedError


def test_pyg_sampler_over_data_gives_pyg_batch():
    torch.manual_seed(0)
    row, col = random_edges(40, 40, 200, seed=7)
    edge_index = torch.from_numpy(np.stack([row, col]))
    data = Data(
        x=torch.randn(40, 3),
        y=torch.arange(40),
        edge_index=edge_index,
        edge_attr=torch.randn(200, 2),
        num_nodes=40,
    )
    data.graph_attr = "kept"
    mask = torch.zeros(40, dtype=torch.bool)
    mask[[2, 9, 13, 21, 38]] = True
    sampler = FullOneHop(edge_index)
    sample = SamplePyGNodes.from_loader_args(sampler, data, input_nodes=mask)
    gather = GatherPyGOutput(data, sampler.edge_permutation)
    index = np.array([4, 0, 2])  # positions into the seeds 2, 9, 13, 21, 38
    out = sample(BatchRequest(index=index, seed=123))
    batch = gather(out)

    seeds = torch.tensor([38, 2, 13])
    assert torch.equal(batch.n_id[:3], seeds)
    assert torch.equal(batch.input_id, seeds)  # a mask: input_id = node ids, as in PyG
    assert torch.equal(batch.x, data.x[batch.n_id]) and torch.equal(batch.y, batch.n_id)
    assert torch.equal(batch.edge_attr, data.edge_attr[batch.e_id])
    assert torch.equal(batch.n_id[batch.edge_index], edge_index[:, batch.e_id])
    assert int(torch.isin(edge_index[1], seeds).sum()) == batch.e_id.numel()
    assert batch.graph_attr == "kept" and batch.batch_size == 3
    expected = filter_data(data, out.node, out.row, out.col, out.edge, sampler.perm)
    for key in ("x", "y", "edge_attr", "edge_index"):
        assert torch.equal(batch[key], expected[key])

    loader = NodeLoader(data, FullOneHop(edge_index), input_nodes=mask)
    assert_same_batch(batch, loader(torch.from_numpy(index)))


def test_pyg_sampler_over_pairs_gives_pyg_batch():
    feature_store, graph_store, (row, col) = homogeneous_stores(seed=8)
    edge_index = torch.from_numpy(np.stack([row, col]))
    sampler = FullOneHop(edge_index, set_metadata=False)  # the stage fills the metadata in
    sample = SamplePyGNodes.from_loader_args(
        sampler, (feature_store, graph_store), input_nodes=torch.tensor([3, 8, 12, 40])
    )
    batch = GatherPyGOutput((feature_store, graph_store), sampler.edge_permutation)(
        sample(BatchRequest(index=np.array([1, 3]), seed=0))
    )
    assert torch.equal(batch.x, batch.n_id) and torch.equal(batch.y, batch.n_id * 10)
    assert torch.equal(batch.n_id[:2], torch.tensor([8, 40]))
    assert torch.equal(batch.input_id, torch.tensor([1, 3]))
    assert torch.equal(batch.n_id[batch.edge_index], edge_index[:, batch.e_id])
    seeds = torch.tensor([3, 8, 12, 40])
    loader = NodeLoader((feature_store, graph_store), FullOneHop(edge_index), input_nodes=seeds)
    assert_same_batch(batch, loader(torch.tensor([1, 3])))

    # heterogeneous pair, seeds given as (node type, None): every paper
    feature_store, graph_store, _ = hetero_stores(seed=9)
    graph = PyGRemoteGraph(feature_store, graph_store)
    pyg = AsPyGSampler(lambda n, i: full_one_hop_hetero(graph, n, i), graph.edge_permutation)
    sample = SamplePyGNodes.from_loader_args(
        pyg, (feature_store, graph_store), input_nodes=(PAPER, None)
    )
    assert sample.input_type == PAPER and sample.input_data.node.numel() == NUM[PAPER]
    gather = GatherPyGOutput((feature_store, graph_store), pyg.edge_permutation, PAPER)
    batch = gather(sample(BatchRequest(index=np.array([5, 6, 7]), seed=0)))
    for node_type in NUM:
        assert torch.equal(batch[node_type].x, batch[node_type].n_id)
    loader = NodeLoader(
        (feature_store, graph_store), pyg, input_nodes=(PAPER, torch.arange(NUM[PAPER]))
    )
    assert_same_batch(batch, loader(torch.tensor([5, 6, 7])))


class CountingFeatureStore(MyFeatureStore):
    """Records every multi_get_tensor call's (group_name, attr_name, index) triples."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def multi_get_tensor(self, attrs, convert_type=False):
        self.calls.append([(a.group_name, a.attr_name, a.index) for a in attrs])
        return super().multi_get_tensor(attrs, convert_type)


def test_one_multi_get_tensor_call_per_batch():
    _, graph_store, _ = homogeneous_stores(seed=10)
    feature_store = CountingFeatureStore()
    feature_store.put_tensor(torch.arange(50), group_name=None, attr_name="x", index=None)
    feature_store.put_tensor(torch.arange(50) * 10, group_name=None, attr_name="y", index=None)
    graph = PyGRemoteGraph(feature_store, graph_store)
    batch = GatherRemoteFeatures(graph)(full_one_hop(graph.csc(), np.array([1, 2]), [0, 1]))
    [call] = feature_store.calls
    assert [(group, name) for group, name, _ in call] == [(None, "x"), (None, "y")]
    assert all(torch.equal(index, batch.n_id) for _, _, index in call)

    _, graph_store, _ = hetero_stores(seed=11)
    feature_store = CountingFeatureStore()
    for node_type, count in NUM.items():
        x = torch.arange(count)
        feature_store.put_tensor(x, group_name=node_type, attr_name="x", index=None)
    graph = PyGRemoteGraph(feature_store, graph_store)
    batch = GatherRemoteFeatures(graph)(full_one_hop_hetero(graph, np.array([0, 5]), [0, 1]))
    [call] = feature_store.calls
    assert [(group, name) for group, name, _ in call] == [(PAPER, "x"), (AUTHOR, "x")]
    for group, _, index in call:
        assert torch.equal(index, batch[group].n_id)
