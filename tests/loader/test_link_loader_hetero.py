"""LinkNeighborLoader on heterogeneous graphs, as PyG users call it, on graphs whose features are
node ids: the link fields where PyG puts them, labels, negatives of the right node types
(uniform, optionally never a true edge, never later than their edge), checked by brute force,
against PyG's own edge_sample run with our sampler, and against PyG's own LinkNeighborLoader
where its sampling backend is installed; PyG store pairs of typed edges against the same graph
in memory."""

import math

import numpy as np
import pytest
import torch
from scipy.stats import chisquare
from torch_geometric.data import HeteroData
from torch_geometric.sampler import BaseSampler as PyGBaseSampler
from torch_geometric.sampler import EdgeSamplerInput as PyGEdgeSamplerInput
from torch_geometric.sampler import HeteroSamplerOutput as PyGHeteroSamplerOutput
from torch_geometric.sampler.neighbor_sampler import edge_sample as pyg_edge_sample
from torch_geometric.testing import MyFeatureStore, MyGraphStore

from graphengine import LinkNeighborLoader
from graphengine.loader.hetero import HeteroGraph
from graphengine.loader.seeds import derive_seed
from samplers import EdgeSamplerInput, HeteroNeighborSampler, NeighborSampler, SamplerInput
from samplers.link import NegativeSampling, sample_from_edges
from tests.helpers.batches import (
    NEGATIVES,
    STORE_NEGATIVES,
    assert_same_batch,
    check_hetero_batch,
)
from tests.helpers.graphs import id_hetero
from tests.helpers.pyg_stores import hetero_stores

WRITES = ("author", "writes", "paper")
CITES = ("paper", "cites", "paper")
EDGE_TYPES = [pytest.param(WRITES, id="two-types"), pytest.param(CITES, id="one-type")]
DISJOINT = [pytest.param(False, id="shared"), pytest.param(True, id="disjoint")]


def true_edges(data: HeteroData, edge_type) -> set:
    return set(map(tuple, data[edge_type].edge_index.t().tolist()))


def edges_or_reverses(data: HeteroData, edge_type) -> set:
    """The edges of ``edge_type`` and the reverses of those of every type back (what a
    bidirectional subgraph may hold for it)."""
    out = true_edges(data, edge_type)
    for other in data.edge_types:
        if (other[0], other[-1]) == (edge_type[-1], edge_type[0]):
            out |= {(d, s) for s, d in true_edges(data, other)}
    return out


def labelled_ends(batch, edge_type, index: torch.Tensor) -> torch.Tensor:
    """``[2, n]`` positions of ``edge_label_index`` (or alike) as global ids."""
    return torch.stack([batch[edge_type[0]].n_id[index[0]], batch[edge_type[-1]].n_id[index[1]]])


@pytest.mark.parametrize("disjoint", DISJOINT)
@pytest.mark.parametrize("edge_type", EDGE_TYPES)
def test_binary_fields_labels_and_negative_types(edge_type, disjoint):
    data = id_hetero()
    seeds = data[edge_type].edge_index[:, 100:300]
    loader = LinkNeighborLoader(
        data,
        [3, 2],
        edge_label_index=(edge_type, seeds),
        batch_size=32,
        neg_sampling=NegativeSampling("binary", 1.5),
        disjoint=disjoint,
        seed=0,
    )
    assert len(loader) == math.ceil(200 / 32)
    for batch in loader:
        check_hetero_batch(batch, data)
        store = batch[edge_type]
        num_pos = store.input_id.numel()
        num_neg = math.ceil(num_pos * 1.5)
        assert store.edge_label_index.shape == (2, num_pos + num_neg)
        ends = labelled_ends(batch, edge_type, store.edge_label_index)
        assert torch.equal(ends[:, :num_pos], seeds[:, store.input_id])
        assert ends[0].max() < data[edge_type[0]].num_nodes  # ids of the right types
        assert ends[1].max() < data[edge_type[-1]].num_nodes
        expected = torch.cat([torch.ones(num_pos), torch.zeros(num_neg)])
        assert torch.equal(store.edge_label, expected)
        for node_type in data.node_types:
            assert "batch_size" not in batch[node_type]
            assert "input_id" not in batch[node_type]
        if disjoint:  # as PyG: trees count the sources, then the destinations, modulo num_pos
            trees = torch.arange(num_pos + num_neg)
            src_trees = batch[edge_type[0]].batch[store.edge_label_index[0]]
            assert torch.equal(src_trees, trees % num_pos)
            dst_trees = batch[edge_type[-1]].batch[store.edge_label_index[1]]
            assert torch.equal(dst_trees, (trees + num_pos + num_neg) % num_pos)
            for node_type in data.node_types:
                assert batch[node_type].batch.max() < num_pos


@pytest.mark.parametrize("amount", [1, 3])
@pytest.mark.parametrize("disjoint", DISJOINT)
@pytest.mark.parametrize("edge_type", EDGE_TYPES)
def test_triplet_fields_on_the_end_types(edge_type, disjoint, amount):
    data = id_hetero()
    negative = NegativeSampling("triplet", amount, exclude_edges=True)
    loader = LinkNeighborLoader(
        data, [2], edge_label_index=edge_type, batch_size=40, neg_sampling=negative, seed=1
    )
    true = true_edges(data, edge_type)
    src_type, dst_type = edge_type[0], edge_type[-1]
    for batch in loader:
        check_hetero_batch(batch, data)
        input_id = batch[edge_type].input_id
        num_pos = input_id.numel()
        src = batch[src_type].n_id[batch[src_type].src_index]
        assert torch.equal(src, data[edge_type].edge_index[0, input_id])
        dst = batch[dst_type].n_id[batch[dst_type].dst_pos_index]
        assert torch.equal(dst, data[edge_type].edge_index[1, input_id])
        neg_index = batch[dst_type].dst_neg_index
        assert neg_index.shape == ((num_pos,) if amount == 1 else (num_pos, amount))
        negatives = batch[dst_type].n_id[neg_index].view(num_pos, -1)
        assert negatives.max() < data[dst_type].num_nodes
        pairs = zip(src.tolist(), negatives.tolist(), strict=True)
        assert not any((s, d) in true for s, row in pairs for d in row)  # exclusion
        assert "edge_label_index" not in batch[edge_type]
        assert "edge_label" not in batch[edge_type]


def test_negatives_are_uniform_over_their_node_types():
    data = id_hetero(num_papers=40, num_authors=13)
    loader = LinkNeighborLoader(
        data, [1], edge_label_index=WRITES, batch_size=100, neg_sampling="binary", seed=2
    )
    drawn = []
    for epoch in range(6):
        loader.set_epoch(epoch)
        for batch in loader:
            store = batch[WRITES]
            num_pos = store.input_id.numel()
            drawn.append(labelled_ends(batch, WRITES, store.edge_label_index[:, num_pos:]))
    pairs = torch.cat(drawn, dim=1).numpy()
    assert chisquare(np.bincount(pairs[0], minlength=13)).pvalue > 1e-4
    assert chisquare(np.bincount(pairs[1], minlength=40)).pvalue > 1e-4


def test_binary_exclusion_never_draws_a_true_edge():
    data = id_hetero(num_papers=40, num_authors=10)  # 600 edges over 400 pairs: dense
    true = true_edges(data, WRITES)
    plain = LinkNeighborLoader(
        data, [1], edge_label_index=WRITES, batch_size=50, seed=3, neg_sampling="binary"
    )
    drawn = []
    for batch in plain:
        num_pos = batch[WRITES].input_id.numel()
        drawn += labelled_ends(batch, WRITES, batch[WRITES].edge_label_index[:, num_pos:]).t()
    assert any(tuple(pair.tolist()) in true for pair in drawn)  # PyG's law: true edges too
    strict = LinkNeighborLoader(
        data,
        [1],
        edge_label_index=WRITES,
        batch_size=50,
        seed=3,
        neg_sampling=NegativeSampling("binary", 2, exclude_edges=True),
    )
    for batch in strict:
        num_pos = batch[WRITES].input_id.numel()
        pairs = labelled_ends(batch, WRITES, batch[WRITES].edge_label_index[:, num_pos:])
        assert not any(tuple(pair) in true for pair in pairs.t().tolist())


@pytest.mark.parametrize("mode", ["binary", "triplet"])
@pytest.mark.parametrize("edge_type", EDGE_TYPES)
def test_temporal_links_hold_no_future(edge_type, mode):
    data = id_hetero(seed=4)
    src, dst = data[edge_type].edge_index
    edge_time = torch.maximum(data[edge_type[0]].time[src], data[edge_type[-1]].time[dst]) + 3
    loader = LinkNeighborLoader(
        data,
        [3, 3],
        edge_label_index=edge_type,
        edge_label_time=edge_time,
        time_attr="time",
        batch_size=25,
        neg_sampling=NegativeSampling(mode, 2),
        seed=5,
    )
    for batch in loader:
        check_hetero_batch(batch, data)
        input_id = batch[edge_type].input_id
        num_pos = input_id.numel()
        times = edge_time[input_id]
        if mode == "binary":
            label_time = batch[edge_type].edge_label_time
            assert torch.equal(label_time, times.repeat(3)[: 3 * num_pos])
            ends = labelled_ends(batch, edge_type, batch[edge_type].edge_label_index)
            assert (data[edge_type[0]].time[ends[0]] <= label_time).all()  # negatives too
            assert (data[edge_type[-1]].time[ends[1]] <= label_time).all()
        else:
            for node_type in {edge_type[0], edge_type[-1]}:
                assert torch.equal(batch[node_type].seed_time, times)
            negatives = batch[edge_type[-1]].n_id[batch[edge_type[-1]].dst_neg_index]
            assert (data[edge_type[-1]].time[negatives] <= times.view(-1, 1)).all()
        for node_type in data.node_types:  # every node no later than its tree's edge
            store = batch[node_type]
            assert (data[node_type].time[store.n_id] <= times[store.batch]).all()


@pytest.mark.parametrize(
    "options",
    [
        pytest.param({"subgraph_type": "bidirectional"}, id="bidirectional"),
        pytest.param({"subgraph_type": "induced"}, id="induced"),
        pytest.param({"replace": True}, id="replace"),
        pytest.param({"weight_attr": "weight"}, id="weighted"),
        pytest.param({"num_workers": 2}, id="threads"),
    ],
)
def test_every_sampling_mode_keeps_the_link_fields(options):
    data = id_hetero(seed=6)
    for edge_type in data.edge_types:
        data[edge_type].weight = torch.rand(data[edge_type].num_edges)
    loader = LinkNeighborLoader(
        data,
        {t: [3, 2] for t in data.edge_types},
        edge_label_index=WRITES,
        batch_size=30,
        neg_sampling="binary",
        seed=7,
        **options,
    )
    batches = list(loader)
    assert len(batches) == math.ceil(data[WRITES].num_edges / 30)
    for batch in batches:
        store = batch[WRITES]
        num_pos = store.input_id.numel()
        ends = labelled_ends(batch, WRITES, store.edge_label_index)
        assert torch.equal(ends[:, :num_pos], data[WRITES].edge_index[:, store.input_id])
        for edge_type in data.edge_types:  # every sampled edge exists (or its reverse)
            edge_index = batch[edge_type].edge_index
            pairs = labelled_ends(batch, edge_type, edge_index).t().tolist()
            assert pairs
            assert set(map(tuple, pairs)) <= edges_or_reverses(data, edge_type)


def as_pyg(out) -> PyGHeteroSamplerOutput:
    """Our heterogeneous output as PyG's."""

    def as_torch(values):
        return {k: torch.from_numpy(v) for k, v in values.items()}

    return PyGHeteroSamplerOutput(
        as_torch(out.node),
        as_torch(out.row),
        as_torch(out.col),
        as_torch(out.edge),
        None if out.batch is None else as_torch(out.batch),
        {k: list(v) for k, v in out.num_sampled_nodes.items()},
        {k: list(v) for k, v in out.num_sampled_edges.items()},
    )


def pyg_reference(data, edge_type, seeds, sampler, disjoint, edge_time=None):
    """PyG's own edge_sample on ``seeds`` (no negatives), run with our sampler."""

    def sample_fn(seed_dict, seed_time_dict):
        times = None
        if seed_time_dict is not None:
            times = {t: v.numpy() for t, v in seed_time_dict.items()}
        seed_dict = {t: v.numpy() for t, v in seed_dict.items()}
        return as_pyg(sampler.sample_from_typed_nodes(seed_dict, derive_seed(0, -1), times))

    inputs = PyGEdgeSamplerInput(
        None, seeds[0], seeds[1], label=None, time=edge_time, input_type=edge_type
    )
    num_nodes = {t: data[t].num_nodes for t in data.node_types}
    return pyg_edge_sample(inputs, sample_fn, num_nodes, disjoint)


@pytest.mark.parametrize("temporal", [False, True], ids=["static", "temporal"])
@pytest.mark.parametrize("disjoint", DISJOINT)
@pytest.mark.parametrize("edge_type", EDGE_TYPES)
def test_layout_equals_pygs_edge_sample(edge_type, disjoint, temporal):
    """Without negatives a batch is deterministic: PyG's own edge_sample, run with our
    sampler, seeds the same nodes per type and gives the same labels and trees."""
    data = id_hetero(seed=8)
    graph = HeteroGraph.from_data(data)
    node_time = {t: data[t].time.numpy() for t in data.node_types} if temporal else None
    sampler = HeteroNeighborSampler(
        graph.node_types, graph.num_nodes, graph.csc, [2, 2], disjoint=disjoint, node_time=node_time
    )
    seeds = data[edge_type].edge_index[:, 10:40]
    edge_time = None
    if temporal:
        src, dst = seeds
        edge_time = torch.maximum(data[edge_type[0]].time[src], data[edge_type[-1]].time[dst])
    reference = pyg_reference(data, edge_type, seeds, sampler, disjoint or temporal, edge_time)
    loader = LinkNeighborLoader(
        data,
        [2, 2],
        edge_label_index=(edge_type, seeds),
        edge_label_time=edge_time,
        time_attr="time" if temporal else None,
        batch_size=30,
        disjoint=disjoint,
        neighbor_sampler=sampler,
    )
    batch = loader(torch.arange(30))
    assert torch.equal(batch[edge_type].input_id, torch.arange(30))
    assert torch.equal(batch[edge_type].edge_label_index, reference.metadata[1])
    for node_type in data.node_types:
        assert torch.equal(batch[node_type].n_id, reference.node[node_type])
        if disjoint or temporal:
            assert torch.equal(batch[node_type].batch, reference.batch[node_type])
    if temporal:
        assert torch.equal(batch[edge_type].edge_label_time, reference.metadata[3])


def canonical(batch, data, edge_type) -> dict:
    """What a batch holds independently of node order: node sets, edge sets (global ids),
    the labelled edges (global ids) and labels."""
    out = {t: sorted(batch[t].n_id.tolist()) for t in data.node_types}
    for t in data.edge_types:
        out[t] = sorted(map(tuple, labelled_ends(batch, t, batch[t].edge_index).t().tolist()))
    out["labelled"] = labelled_ends(batch, edge_type, batch[edge_type].edge_label_index).tolist()
    out["input_id"] = batch[edge_type].input_id.tolist()
    return out


@pytest.mark.parametrize("edge_type", EDGE_TYPES)
def test_equals_pygs_link_neighbor_loader(edge_type):
    """All neighbors (deterministic): PyG's own loader gives the same nodes, edges and labels
    (node order aside); with negatives, the same positives, labels and shapes."""
    pytest.importorskip("torch_sparse")
    from torch_geometric.loader import LinkNeighborLoader as PyGLinkNeighborLoader

    data = id_hetero(seed=9, num_papers=40, num_authors=30)
    for t in data.edge_types:
        del data[t].edge_attr  # PyG slices edge attributes alike; not compared here
    seeds = data[edge_type].edge_index[:, :24]
    kwargs = {"edge_label_index": (edge_type, seeds), "batch_size": 24}
    ours = next(iter(LinkNeighborLoader(data, [-1, -1], **kwargs)))
    theirs = next(iter(PyGLinkNeighborLoader(data, [-1, -1], **kwargs)))
    assert canonical(ours, data, edge_type) == canonical(theirs, data, edge_type)

    kwargs["neg_sampling"] = "binary"
    ours = next(iter(LinkNeighborLoader(data, [1], **kwargs)))
    theirs = next(iter(PyGLinkNeighborLoader(data, [1], **kwargs)))
    for batch in (ours, theirs):
        store = batch[edge_type]
        assert store.edge_label_index.shape == (2, 48)
        assert torch.equal(labelled_ends(batch, edge_type, store.edge_label_index)[:, :24], seeds)
    assert torch.equal(ours[edge_type].edge_label, theirs[edge_type].edge_label)
    assert torch.equal(ours[edge_type].input_id, theirs[edge_type].input_id)

    kwargs["neg_sampling"] = NegativeSampling("triplet", 2)
    ours = next(iter(LinkNeighborLoader(data, [1], **kwargs)))
    theirs = next(iter(PyGLinkNeighborLoader(data, [1], **{**kwargs, "neg_sampling": "triplet"})))
    src_type, dst_type = edge_type[0], edge_type[-1]
    assert torch.equal(ours[src_type].n_id[ours[src_type].src_index], seeds[0])
    assert torch.equal(theirs[src_type].n_id[theirs[src_type].src_index], seeds[0])
    assert torch.equal(ours[dst_type].n_id[ours[dst_type].dst_pos_index], seeds[1])
    assert ours[dst_type].dst_neg_index.shape == (24, 2)


def test_bad_hetero_link_arguments():
    data = id_hetero()
    with pytest.raises(ValueError, match=r"names edge type \('author', 'reads', 'paper'\)"):
        LinkNeighborLoader(data, [2], edge_label_index=("author", "reads", "paper"))
    with pytest.raises(ValueError, match="'edge_label_index' of a HeteroData must be"):
        LinkNeighborLoader(data, [2], edge_label_index=torch.zeros(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"'edge_label_index\[0\]' holds node id 80"):
        bad = torch.tensor([[80], [0]])
        LinkNeighborLoader(data, [2], edge_label_index=(WRITES, bad))
    with pytest.raises(ValueError, match=r"shape \[2, num_edges\]"):
        LinkNeighborLoader(data, [2], edge_label_index=(WRITES, torch.zeros(3, dtype=torch.long)))
    with pytest.raises(ValueError, match="one entry per seed edge"):
        LinkNeighborLoader(data, [2], edge_label_index=WRITES, edge_label=torch.ones(3))
    by_pair = LinkNeighborLoader(data, [2], edge_label_index=("author", "paper"), batch_size=4)
    assert torch.equal(by_pair(torch.arange(4))[WRITES].input_id, torch.arange(4))


def hetero_sampler(data, **options) -> HeteroNeighborSampler:
    graph = HeteroGraph.from_data(data)
    return HeteroNeighborSampler(graph.node_types, graph.num_nodes, graph.csc, [3, 2], **options)


@pytest.mark.parametrize("disjoint", DISJOINT)
def test_typed_seeds_of_one_type_sample_as_node_seeds(disjoint):
    sampler = hetero_sampler(id_hetero(), disjoint=disjoint)
    seeds = np.array([5, 9, 5, 70])
    single = sampler.sample_from_nodes(SamplerInput(seeds, np.arange(4), 11, None, "paper"))
    typed = sampler.sample_from_typed_nodes({"paper": seeds}, 11)
    assert typed.input_type == "paper" and typed.batch_size == 4
    for field in ("node", "row", "col", "edge", "batch", "num_sampled_nodes"):
        first, second = getattr(single, field), getattr(typed, field)
        if first is None:
            assert second is None
            continue
        for key in first:
            assert np.array_equal(first[key], second[key])


def test_typed_seeds_number_trees_across_types():
    data = id_hetero()
    sampler = hetero_sampler(data, node_time={t: data[t].time.numpy() for t in data.node_types})
    authors, papers = np.array([3, 4, 3]), np.array([7, 8])
    times = {"author": np.array([60, 10, 60]), "paper": np.array([30, 5])}
    out = sampler.sample_from_typed_nodes({"author": authors, "paper": papers}, 0, times)
    assert np.array_equal(out.node["author"][:3], authors)
    assert np.array_equal(out.node["paper"][:2], papers)
    assert np.array_equal(out.batch["author"][:3], np.arange(3))
    assert np.array_equal(out.batch["paper"][:2], 3 + np.arange(2))
    assert np.array_equal(out.seed_time, times["author"])
    tree_time = np.concatenate([times["author"], times["paper"]])
    for node_type in data.node_types:  # every sampled node no later than its tree's seed
        first = out.num_sampled_nodes[node_type][0]
        own = data[node_type].time.numpy()[out.node[node_type][first:]]
        assert (own <= tree_time[out.batch[node_type][first:]]).all()
    assert sum(out.num_sampled_nodes[t][1] for t in data.node_types) > 0


def test_bad_typed_seeds():
    sampler = hetero_sampler(id_hetero())
    with pytest.raises(ValueError, match="'node' must be a non-empty dict"):
        sampler.sample_from_typed_nodes({}, 0)
    with pytest.raises(ValueError, match="'time' must be None or a dict with the node types"):
        sampler.sample_from_typed_nodes({"paper": np.array([0])}, 0, {"author": np.array([0])})
    with pytest.raises(ValueError, match="'node' names node type 'venue'"):
        sampler.sample_from_typed_nodes({"venue": np.array([0])}, 0)
    with pytest.raises(ValueError, match=r"'node\['author'\]' holds node id 80"):
        sampler.sample_from_typed_nodes({"author": np.array([80])}, 0)
    inputs = EdgeSamplerInput(np.array([0]), np.array([0]), np.array([0]), 0, input_type=WRITES)
    with pytest.raises(TypeError, match="need 'num_nodes' per node type"):
        sample_from_edges(sampler, inputs, 120)
    data = id_hetero()
    homogeneous = NeighborSampler(np.zeros(2, dtype=np.int64), np.zeros(0, dtype=np.int64), [2])
    with pytest.raises(TypeError, match=r"must be a samplers\.HeteroNeighborSampler"):
        LinkNeighborLoader(data, [2], edge_label_index=WRITES, neighbor_sampler=homogeneous)


@pytest.mark.parametrize("negative", NEGATIVES)
@pytest.mark.parametrize("edge_type", EDGE_TYPES)
def test_transform_sampler_output_sees_pygs_hetero_link_output(edge_type, negative):
    data = id_hetero()
    options = {"edge_label_index": edge_type, "batch_size": 20, "seed": 1}
    options["neg_sampling"] = negative
    plain = LinkNeighborLoader(data, [2, 2], **options)(torch.arange(20))
    seen = []

    def record(out):
        seen.append(out)
        return out

    through = LinkNeighborLoader(data, [2, 2], transform_sampler_output=record, **options)
    assert_same_batch(plain, through(torch.arange(20)))
    assert isinstance(seen[0], PyGHeteroSamplerOutput)
    assert torch.equal(seen[0].metadata[0], torch.arange(20))


class HeteroEdgeSampleWithOurs(PyGBaseSampler):
    """A PyG sampler: PyG's own edge_sample around our heterogeneous sampler's draws."""

    def __init__(self, data: HeteroData):
        graph = HeteroGraph.from_data(data)
        self.sampler = hetero_sampler(data)
        self.num_nodes = graph.num_nodes
        self.perm = {
            t: None if p is None else torch.from_numpy(p) for t, p in graph.edge_ids.items()
        }

    def sample_from_nodes(self, index, **kwargs):
        raise NotImplementedError

    def sample_from_edges(self, inputs, neg_sampling=None):
        return pyg_edge_sample(inputs, self._sample, self.num_nodes, False, None, neg_sampling)

    def _sample(self, seed_dict, seed_time_dict):
        seeds = {t: v.numpy() for t, v in seed_dict.items()}
        return as_pyg(self.sampler.sample_from_typed_nodes(seeds, derive_seed(0, -1)))

    @property
    def edge_permutation(self):
        return self.perm


@pytest.mark.parametrize("edge_type", EDGE_TYPES)
def test_pyg_samplers_sample_hetero_links(edge_type):
    data = id_hetero(seed=10)
    pyg = HeteroEdgeSampleWithOurs(data)
    options = {"edge_label_index": edge_type, "batch_size": 20}
    ours = LinkNeighborLoader(data, [3, 2], neighbor_sampler=pyg.sampler, **options)
    theirs = LinkNeighborLoader(data, [3, 2], neighbor_sampler=pyg, **options)
    assert_same_batch(ours(torch.arange(20)), theirs(torch.arange(20)))
    triplet = LinkNeighborLoader(
        data, [3, 2], neighbor_sampler=pyg, neg_sampling="triplet", **options
    )
    batch = triplet(torch.arange(20))
    src, dst = data[edge_type].edge_index[:, :20]
    assert torch.equal(batch[edge_type[0]].n_id[batch[edge_type[0]].src_index], src)
    assert torch.equal(batch[edge_type[-1]].n_id[batch[edge_type[-1]].dst_pos_index], dst)
    assert batch[edge_type[-1]].dst_neg_index.shape == (20,)


def sorted_hetero_and_stores(seed=4):
    """A HeteroData (node features and times) whose edges are sorted by destination, and the
    same graph as a PyG store pair marked sorted, so that both keep one CSC order."""
    data = id_hetero(seed=seed)
    feature_store, graph_store = MyFeatureStore(), MyGraphStore()
    for node_type in data.node_types:
        del data[node_type].y
        for name in ("x", "time"):
            feature_store.put_tensor(
                data[node_type][name], group_name=node_type, attr_name=name, index=None
            )
    for edge_type in data.edge_types:
        del data[edge_type].edge_attr  # a store pair gathers no edge attributes, as in PyG
        edge_index = data[edge_type].edge_index
        edge_index = edge_index[:, edge_index[1].argsort(stable=True)]
        data[edge_type].edge_index = edge_index
        size = (data[edge_type[0]].num_nodes, data[edge_type[-1]].num_nodes)
        graph_store.put_edge_index(
            edge_index, edge_type=edge_type, layout="coo", size=size, is_sorted=True
        )
    return data, (feature_store, graph_store)


def assert_same_typed_batch(first, second, data):
    """Every node and edge type's store of two batches holds the same keys and values, but
    ``num_nodes``, which a store pair's batches set (as PyG's filtering of a pair does)."""
    for key in (*data.node_types, *data.edge_types):
        mine, other = first[key], second[key]
        assert set(mine.keys()) - {"num_nodes"} == set(other.keys()) - {"num_nodes"}, key
        for name, value in mine.items():
            if name == "num_nodes":
                continue
            if isinstance(value, torch.Tensor):
                assert torch.equal(value, other[name]), (key, name)
            else:
                assert value == other[name], (key, name)


@pytest.mark.parametrize("negative", STORE_NEGATIVES)
@pytest.mark.parametrize("edge_type", EDGE_TYPES)
def test_typed_store_pairs_give_the_batches_of_their_data(edge_type, negative):
    data, stores = sorted_hetero_and_stores()
    seeds = data[edge_type].edge_index[:, 50:250]
    options = {"edge_label_index": (edge_type, seeds), "batch_size": 64, "seed": 3}
    options["neg_sampling"] = negative
    pairs = zip(
        LinkNeighborLoader(data, [3, 2], **options),
        LinkNeighborLoader(stores, [3, 2], **options),
        strict=True,
    )
    for in_memory, remote in pairs:
        assert_same_typed_batch(in_memory, remote, data)
        store = remote[edge_type]
        if "edge_label_index" in store:
            ends = labelled_ends(remote, edge_type, store.edge_label_index)
            assert torch.equal(ends[:, : store.input_id.numel()], seeds[:, store.input_id])


def test_temporal_typed_store_pairs_give_the_batches_of_their_data():
    data, stores = sorted_hetero_and_stores(seed=5)
    seeds = data[WRITES].edge_index[:, :200]
    times = torch.maximum(data["author"].time[seeds[0]], data["paper"].time[seeds[1]]) + 5
    options = {"edge_label_index": (WRITES, seeds), "edge_label_time": times}
    options.update(time_attr="time", batch_size=64, seed=3, neg_sampling="binary")
    pairs = zip(
        LinkNeighborLoader(data, [3, 2], **options),
        LinkNeighborLoader(stores, [3, 2], **options),
        strict=True,
    )
    for in_memory, remote in pairs:
        assert_same_typed_batch(in_memory, remote, data)


def test_all_edges_of_a_typed_store_seed_in_the_order_of_their_ids():
    """An edge type seeds all its edges (stored as COO, CSR or CSC), as graph_store.coo()
    lists them (PyG's reading); excluded negatives are never one of them (brute force)."""
    feature_store, graph_store, edges = hetero_stores(seed=3)
    stored = graph_store.coo()
    for edge_type, (row, col) in edges.items():
        loader = LinkNeighborLoader(
            (feature_store, graph_store),
            [1],
            edge_label_index=(edge_type[0], edge_type[-1]),  # one edge type links them
            batch_size=row.shape[0],
            neg_sampling=NegativeSampling("binary", 3, exclude_edges=True),
        )
        batch = loader(torch.arange(row.shape[0]))
        ends = labelled_ends(batch, edge_type, batch[edge_type].edge_label_index)
        num_pos = row.shape[0]
        assert torch.equal(ends[:, :num_pos], torch.from_numpy(np.stack([row, col])))
        assert torch.equal(
            ends[:, :num_pos], torch.stack([stored[0][edge_type], stored[1][edge_type]])
        )
        true = set(zip(row.tolist(), col.tolist(), strict=True))
        assert not any(tuple(p) in true for p in ends[:, num_pos:].t().tolist())


@pytest.mark.parametrize("edge_type", EDGE_TYPES)
def test_pyg_samplers_sample_typed_store_pairs_as_pygs_loader(edge_type):
    pytest.importorskip("torch_sparse")
    from torch_geometric.loader import LinkNeighborLoader as PyGLinkNeighborLoader
    from torch_geometric.sampler import NeighborSampler as PyGNeighborSampler

    data, stores = sorted_hetero_and_stores(seed=6)
    options = {
        "edge_label_index": (edge_type, data[edge_type].edge_index[:, :64]),
        "batch_size": 64,
        "neighbor_sampler": PyGNeighborSampler(stores, [3, 2]),
    }
    for negative in (None, "binary", ("triplet", 2)):
        torch.manual_seed(0)
        ours = LinkNeighborLoader(stores, [3, 2], neg_sampling=negative, **options)
        ours = ours(torch.arange(64))
        torch.manual_seed(0)
        theirs = PyGLinkNeighborLoader(stores, [3, 2], neg_sampling=negative, **options)
        assert_same_typed_batch(ours, theirs(torch.arange(64)), data)


def test_transform_sampler_output_over_typed_store_pairs():
    data, stores = sorted_hetero_and_stores(seed=7)
    options = {"edge_label_index": (WRITES, None), "batch_size": 30, "seed": 1}
    for negative in ("binary", "triplet"):
        plain = LinkNeighborLoader(stores, [2, 2], neg_sampling=negative, **options)
        through = LinkNeighborLoader(
            stores, [2, 2], neg_sampling=negative, transform_sampler_output=lambda o: o, **options
        )
        assert_same_typed_batch(plain(torch.arange(30)), through(torch.arange(30)), data)


def test_bad_typed_store_pair_arguments():
    _, stores = sorted_hetero_and_stores()
    with pytest.raises(ValueError, match="'edge_label_index' is required for a"):
        LinkNeighborLoader(stores, [2])
    with pytest.raises(ValueError, match=r"names edge type \('author', 'reads', 'paper'\)"):
        LinkNeighborLoader(stores, [2], edge_label_index=("author", "reads", "paper"))
    with pytest.raises(ValueError, match=r"'edge_label_index' of a .*pair of typed edges must"):
        LinkNeighborLoader(stores, [2], edge_label_index=torch.zeros(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"'edge_label_index\[0\]' holds node id 80"):
        LinkNeighborLoader(stores, [2], edge_label_index=(WRITES, torch.tensor([[80], [0]])))
