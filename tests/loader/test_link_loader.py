"""LinkNeighborLoader as PyG users call it, on graphs whose features are node ids: seed edges,
negatives (uniform, optionally never a true edge, never later than their edge) and labels,
checked by brute force and against PyG's own edge_sample and LinkLoader; PyG store pairs
against the same graph in memory; the Numba negative draws checked by chi-square against the
uniform law over the allowed nodes or pairs."""

import math

import numba
import numpy as np
import pytest
import torch
from scipy.stats import chisquare
from torch_geometric.data import Data
from torch_geometric.loader import LinkLoader as PyGLinkLoader
from torch_geometric.sampler import BaseSampler as PyGBaseSampler
from torch_geometric.sampler import EdgeSamplerInput as PyGEdgeSamplerInput
from torch_geometric.sampler import NegativeSampling as PyGNegativeSampling
from torch_geometric.sampler import SamplerOutput as PyGSamplerOutput
from torch_geometric.sampler.neighbor_sampler import edge_sample as pyg_edge_sample
from torch_geometric.testing import MyFeatureStore, MyGraphStore

from graphengine import Graph, LinkNeighborLoader
from graphengine.loader.seeds import derive_seed
from samplers import EdgeSamplerInput, NeighborSampler, SamplerInput
from samplers.link import (
    EdgeSet,
    NegativeSampling,
    NodesByTime,
    draw_negative_destinations,
    draw_negative_pairs,
    sample_from_edges,
)
from tests.helpers.batches import NEGATIVES, STORE_NEGATIVES, assert_same_batch, check_batch
from tests.helpers.graphs import id_graph
from tests.helpers.pyg_stores import homogeneous_stores


def test_binary_negatives_and_labels():
    data = id_graph()
    loader = LinkNeighborLoader(
        data, [3, 2], batch_size=20, neg_sampling=NegativeSampling("binary", 1.5), seed=0
    )
    for batch in loader:
        check_batch(batch, data)
        num_pos = batch.input_id.numel()
        num_neg = math.ceil(num_pos * 1.5)
        assert batch.edge_label_index.shape == (2, num_pos + num_neg)
        ends = batch.n_id[batch.edge_label_index[:, :num_pos]]
        assert torch.equal(ends, data.edge_index[:, batch.input_id])
        assert torch.equal(batch.edge_label, torch.cat([torch.ones(num_pos), torch.zeros(num_neg)]))
        assert "batch_size" not in batch


def test_negatives_are_uniform_and_can_exclude_true_edges():
    data = id_graph(num_nodes=40, num_edges=600)  # dense: true edges are often drawn
    loader = LinkNeighborLoader(data, [1], batch_size=50, neg_sampling="binary", seed=1)
    negatives = []
    for epoch in range(8):
        loader.set_epoch(epoch)
        for batch in loader:
            num_pos = batch.input_id.numel()
            negatives.append(batch.n_id[batch.edge_label_index[:, num_pos:]])
    pairs = torch.cat(negatives, dim=1)
    assert chisquare(np.bincount(pairs[1].numpy(), minlength=40)).pvalue > 1e-4
    true = set(map(tuple, data.edge_index.t().tolist()))
    assert any(tuple(p) in true for p in pairs.t().tolist())  # PyG's law: true edges too
    strict = LinkNeighborLoader(
        data, [1], batch_size=50, seed=1, neg_sampling=NegativeSampling("binary", 2, True)
    )
    for batch in strict:
        num_pos = batch.input_id.numel()
        drawn = batch.n_id[batch.edge_label_index[:, num_pos:]].t().tolist()
        assert not any(tuple(p) in true for p in drawn)


@pytest.mark.parametrize("amount", [1, 3])
def test_triplet_indices(amount):
    data = id_graph()
    loader = LinkNeighborLoader(
        data, [3], batch_size=16, seed=2, neg_sampling=NegativeSampling("triplet", amount)
    )
    for batch in loader:
        num_pos = batch.input_id.numel()
        src, dst = data.edge_index[:, batch.input_id]
        assert torch.equal(batch.n_id[batch.src_index], src)
        assert torch.equal(batch.n_id[batch.dst_pos_index], dst)
        expected = (num_pos,) if amount == 1 else (num_pos, amount)
        assert batch.dst_neg_index.shape == expected
        assert batch.dst_neg_index.max() < batch.num_nodes
        assert "edge_label_index" not in batch and "edge_label" not in batch


def test_edge_labels_shift_when_they_hold_zero():
    data = id_graph()
    labels = torch.arange(data.num_edges) % 2
    batch = next(
        iter(LinkNeighborLoader(data, [2], batch_size=10, edge_label=labels, neg_sampling="binary"))
    )
    assert torch.equal(batch.edge_label[:10], labels[:10].float() + 1)
    assert (batch.edge_label[10:] == 0).all()


def test_temporal_links_hold_no_future():
    data = id_graph(seed=3)
    generator = torch.Generator().manual_seed(4)
    data.node_time = torch.randint(0, 50, (data.num_nodes,), generator=generator)
    src, dst = data.edge_index
    edge_time = torch.maximum(data.node_time[src], data.node_time[dst]) + 5
    loader = LinkNeighborLoader(
        data,
        [3, 3],
        batch_size=16,
        edge_label_time=edge_time,
        time_attr="node_time",
        neg_sampling="binary",
        seed=5,
    )
    for batch in loader:
        check_batch(batch, data)
        num_pos = batch.input_id.numel()
        times = batch.edge_label_time
        assert torch.equal(times[:num_pos], edge_time[batch.input_id])
        ends = batch.n_id[batch.edge_label_index]
        assert (data.node_time[ends] <= times).all()  # negatives included
        tree = batch.batch[batch.edge_index[1]]  # trees count the positive edges (as PyG)
        assert tree.max() < num_pos
        limit = times[tree]
        assert (batch.node_time[batch.edge_index[0]] <= limit).all()


@pytest.mark.parametrize("disjoint", [False, True], ids=["shared", "disjoint"])
def test_labels_equal_pygs_edge_sample(disjoint):
    """Without negatives the batch is deterministic: PyG's own edge_sample, run with our node
    sampler, gives the same seeds' layout and labels."""
    data = id_graph(seed=6)
    graph = Graph.from_data(data)
    sampler = NeighborSampler(graph.indptr, graph.indices, [2], disjoint=disjoint)
    edges = data.edge_index[:, 5:25]

    def sample_fn(seed, seed_time):
        batch_seed = derive_seed(0, -1)  # what loader(index) seeds a batch with
        out = sampler.sample_from_nodes(
            SamplerInput(seed.numpy(), np.arange(seed.numel()), batch_seed)
        )
        batch = None if out.batch is None else torch.from_numpy(out.batch)
        return PyGSamplerOutput(
            torch.from_numpy(out.node),
            torch.from_numpy(out.row),
            torch.from_numpy(out.col),
            torch.from_numpy(out.edge),
            batch,
        )

    inputs = PyGEdgeSamplerInput(None, edges[0], edges[1], label=None)
    reference = pyg_edge_sample(inputs, sample_fn, data.num_nodes, disjoint)
    loader = LinkNeighborLoader(
        data,
        [2],
        edge_label_index=edges,
        batch_size=20,
        disjoint=disjoint,
        neighbor_sampler=sampler,
    )
    batch = loader(torch.arange(20))
    assert torch.equal(batch.edge_label_index, reference.metadata[1])
    assert torch.equal(batch.n_id, reference.node)
    if disjoint:
        assert torch.equal(batch.batch, reference.batch)


def test_bad_link_arguments():
    data = id_graph()
    with pytest.raises(ValueError, match="'edge_label_time' and 'time_attr' go together"):
        LinkNeighborLoader(data, [2], edge_label_time=torch.zeros(data.num_edges, dtype=torch.long))
    with pytest.raises(ValueError, match="must be None for 'triplet'"):
        LinkNeighborLoader(data, [2], edge_label=torch.ones(data.num_edges), neg_sampling="triplet")
    with pytest.raises(ValueError, match="integer 'amount'"):
        NegativeSampling("triplet", 1.5)
    with pytest.raises(NotImplementedError, match=r"HeteroData or \(FeatureStore, GraphStore\)"):
        LinkNeighborLoader([data], [2])
    with pytest.raises(ValueError, match="'edge_label_index' is required for a"):
        LinkNeighborLoader((MyFeatureStore(), MyGraphStore()), [2])
    with pytest.raises(ValueError, match=r"'edge_label_index\[1\]' holds node id 300"):
        LinkNeighborLoader(data, [2], edge_label_index=torch.tensor([[0, 1], [2, 300]]))
    with pytest.raises(ValueError, match=r"shape \[2, num_edges\]"):
        LinkNeighborLoader(data, [2], edge_label_index=torch.zeros(3, 4, dtype=torch.long))


def test_bad_negative_sampling_and_link_arguments_are_named():
    data = id_graph()
    with pytest.raises(TypeError, match=r"'input_nodes' is NeighborLoader's.*'edge_label_index'"):
        LinkNeighborLoader(data, [2], input_nodes=torch.arange(3))
    with pytest.raises(
        TypeError, match=r"'neg_sampling' must be None, 'binary', 'triplet'.*\(got 3\)"
    ):
        LinkNeighborLoader(data, [2], neg_sampling=3)
    with pytest.raises(
        TypeError, match=r"negative sampling 'amount' must be a real number \(got 'x'\)"
    ):
        LinkNeighborLoader(data, [2], neg_sampling=("binary", "x"))
    with pytest.raises(TypeError, match=r"'amount' must be a real number \(got 'x'\)"):
        LinkNeighborLoader(data, [2], neg_sampling={"mode": "binary", "amount": "x"})
    with pytest.raises(ValueError, match=r"'amount' must be finite and positive \(got inf\)"):
        LinkNeighborLoader(data, [2], neg_sampling=("binary", float("inf")))
    with pytest.raises(ValueError, match=r"'amount' must be finite and positive \(got inf\)"):
        LinkNeighborLoader(data, [2], neg_sampling=PyGNegativeSampling("binary", float("inf")))
    with pytest.raises(TypeError, match=r"'neg_sampling_ratio' must be a real number \(got 'x'\)"):
        LinkNeighborLoader(data, [2], neg_sampling_ratio="x")
    with pytest.raises(
        ValueError, match=r"'neg_sampling_ratio' must be finite and >= 0 \(got inf\)"
    ):
        LinkNeighborLoader(data, [2], neg_sampling_ratio=float("inf"))
    with pytest.raises(TypeError, match=r"'amount' must be a real number \(got True\)"):
        NegativeSampling("binary", True)
    with pytest.raises(TypeError, match=r"'edge_label' must hold numbers \(got <U1"):
        LinkNeighborLoader(data, [2], edge_label=np.array(["a"] * data.num_edges))
    with pytest.raises(ValueError, match=r"'edge_label' must have one entry per seed edge"):
        LinkNeighborLoader(data, [2], edge_label="abc")
    batch = next(iter(LinkNeighborLoader(data, [2], batch_size=4, neg_sampling_ratio=0.5)))
    assert batch.edge_label.tolist() == [1.0] * 4 + [0.0] * 2


def test_negative_pairs_are_uniform_over_each_side():
    src, dst = draw_negative_pairs(60_000, 7, 13, seed=3)
    assert src.min() >= 0 and src.max() < 7 and dst.min() >= 0 and dst.max() < 13
    assert chisquare(np.bincount(src * 13 + dst, minlength=7 * 13)).pvalue > 1e-4


def test_temporal_negatives_are_uniform_over_the_nodes_no_later():
    generator = np.random.default_rng(0)
    node_time = generator.integers(0, 10, 30)
    by_time = NodesByTime(node_time)
    limits = generator.integers(node_time.min(), 10, 40_000)
    drawn = draw_negative_destinations(np.zeros(40_000, np.int64), 30, 4, limits, by_time)
    assert (node_time[drawn] <= limits).all()
    for limit in np.unique(limits):  # uniform among the allowed, for every limit
        allowed = np.flatnonzero(node_time <= limit)
        counts = np.bincount(drawn[limits == limit], minlength=30)[allowed]
        if allowed.size > 1:
            assert chisquare(counts).pvalue > 1e-4
    src, dst = draw_negative_pairs(40_000, 30, 30, 5, limits, by_time, by_time)
    assert (node_time[src] <= limits).all() and (node_time[dst] <= limits).all()
    allowed = np.flatnonzero(node_time <= 9)
    assert chisquare(np.bincount(src[limits == 9], minlength=30)[allowed]).pvalue > 1e-4


def test_excluded_negatives_are_uniform_over_the_pairs_that_are_not_edges():
    """A dense graph (brute force over all pairs): never an edge, every other pair alike."""
    generator = np.random.default_rng(1)
    num_src, num_dst = 6, 9
    adjacency = generator.random((num_src, num_dst)) < 0.7
    adjacency[0] = np.arange(num_dst) < num_dst - 1  # source 0: one pair left
    row, col = np.nonzero(adjacency)
    edges = EdgeSet(row, col, num_dst)
    src, dst = draw_negative_pairs(30_000, num_src, num_dst, 6, edges=edges)
    assert not adjacency[src, dst].any()
    free = np.flatnonzero(~adjacency.reshape(-1))
    counts = np.bincount(src * num_dst + dst, minlength=num_src * num_dst)
    assert counts[adjacency.reshape(-1)].sum() == 0
    assert chisquare(counts[free]).pvalue > 1e-4
    sources = np.repeat(np.arange(num_src), 3000)
    drawn = draw_negative_destinations(sources, num_dst, 7, edges=edges)
    assert not adjacency[sources, drawn].any()
    assert (drawn[sources == 0] == num_dst - 1).all()
    for source in range(1, num_src):
        allowed = np.flatnonzero(~adjacency[source])
        counts = np.bincount(drawn[sources == source], minlength=num_dst)[allowed]
        if allowed.size > 1:
            assert chisquare(counts).pvalue > 1e-4


def test_weighted_negatives_follow_the_node_weights():
    """PyG's ``src_weight``/``dst_weight``: each end in proportion to its node's weight (the
    law of ``torch.multinomial(weight, n, replacement=True)``), never a node of weight 0."""
    src_weight = np.array([0.0, 1.0, 3.0, 0.0, 6.0, 2.0, 0.0])
    dst_weight = np.arange(13, dtype=np.float64) % 4
    weights = NegativeSampling("binary", 1, src_weight=src_weight, dst_weight=dst_weight)
    src, dst = draw_negative_pairs(60_000, 7, 13, seed=3, weights=weights)
    for drawn, weight in ((src, src_weight), (dst, dst_weight)):
        counts = np.bincount(drawn, minlength=weight.shape[0])
        assert counts[weight == 0].sum() == 0
        expected = weight[weight > 0] / weight.sum() * drawn.shape[0]
        assert chisquare(counts[weight > 0], expected).pvalue > 1e-4
    only_dst = NegativeSampling("triplet", 1, dst_weight=dst_weight)
    drawn = draw_negative_destinations(np.zeros(60_000, np.int64), 13, 4, weights=only_dst)
    counts = np.bincount(drawn, minlength=13)
    assert counts[dst_weight == 0].sum() == 0
    expected = dst_weight[dst_weight > 0] / dst_weight.sum() * drawn.shape[0]
    assert chisquare(counts[dst_weight > 0], expected).pvalue > 1e-4


def test_negative_node_weights_whose_sum_overflows_are_drawn_in_proportion():
    """Node weights near float64's largest sum past it; negatives still follow them."""
    proportions = np.array([2.0, 0.0, 1.0, 3.0])
    weights = NegativeSampling("triplet", 1, dst_weight=proportions * 5e307)
    drawn = draw_negative_destinations(np.zeros(6000, np.int64), 4, 4, weights=weights)
    counts = np.bincount(drawn, minlength=4)
    assert counts[1] == 0
    expected = proportions[proportions > 0] / proportions.sum() * drawn.shape[0]
    assert chisquare(counts[proportions > 0], expected).pvalue > 1e-4


def test_weighted_negatives_with_times_and_excluded_edges():
    """By weight among the nodes no later than each edge's time, true edges redrawn."""
    generator = np.random.default_rng(4)
    node_time = generator.integers(0, 5, 20)
    weight = generator.integers(0, 4, 20).astype(np.float64)
    weight[np.argmin(node_time)] = 1.0  # every limit allows a node of positive weight
    by_time = NodesByTime(node_time)
    limits = generator.integers(node_time.min(), 5, 40_000)
    edges = EdgeSet(np.zeros(20, np.int64), np.arange(20) * (np.arange(20) % 3 == 0), 20)
    weights = NegativeSampling("triplet", 1, dst_weight=weight)
    sources = np.ones(40_000, np.int64)
    drawn = draw_negative_destinations(sources, 20, 9, limits, by_time, edges, weights)
    assert (node_time[drawn] <= limits).all() and (weight[drawn] > 0).all()
    for limit in np.unique(limits):
        allowed = np.flatnonzero((node_time <= limit) & (weight > 0))
        counts = np.bincount(drawn[limits == limit], minlength=20)[allowed]
        expected = weight[allowed] / weight[allowed].sum() * counts.sum()
        if allowed.size > 1:
            assert chisquare(counts, expected).pvalue > 1e-4
    sources[:] = 0  # source 0 links to 0, 3, 6, ...: those are redrawn
    drawn = draw_negative_destinations(sources, 20, 9, limits, by_time, edges, weights)
    assert (drawn % 3 != 0).all() and (weight[drawn] > 0).all()


@pytest.mark.parametrize(
    ("weight", "match"),
    [
        (np.array([1.0, -1.0, 2.0]), "'src_weight' must be finite and >= 0"),
        (np.array([1.0, np.nan, 2.0]), "'src_weight' must be finite and >= 0"),
        (np.zeros(3), "'src_weight' must give some node a positive weight"),
        (np.ones((3, 1)), "'src_weight' must be a 1-D array of numbers"),
        (np.array(["a", "b", "c"]), "'src_weight' must be a 1-D array of numbers"),
    ],
)
def test_bad_node_weights_are_refused(weight, match):
    with pytest.raises(ValueError, match=match):
        NegativeSampling("binary", 1, src_weight=weight)


def test_node_weights_of_the_wrong_length_are_refused():
    weights = NegativeSampling("binary", 1, src_weight=np.ones(5))
    with pytest.raises(ValueError, match=r"'src_weight' must hold one weight per node .* \(7\)"):
        draw_negative_pairs(10, 7, 7, seed=0, weights=weights)


def test_negatives_do_not_depend_on_the_threads():
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("needs 2 Numba threads")
    node_time = np.arange(500) % 17
    limits = np.random.default_rng(2).integers(0, 17, 20_000)
    edges = EdgeSet(*np.random.default_rng(3).integers(0, 500, (2, 50_000)), 500)
    by_time = NodesByTime(node_time)
    before = numba.get_num_threads()
    runs = []
    try:
        for threads in (1, 2):
            numba.set_num_threads(threads)
            pairs = draw_negative_pairs(20_000, 500, 500, 11, limits, by_time, by_time, edges)
            sources = np.arange(20_000) % 500
            destinations = draw_negative_destinations(sources, 500, 11, limits, by_time, edges)
            runs.append((*pairs, destinations))
    finally:
        numba.set_num_threads(before)
    for first, second in zip(*runs, strict=True):
        assert np.array_equal(first, second)
    other = draw_negative_pairs(20_000, 500, 500, 12, limits, by_time, by_time, edges)
    assert not np.array_equal(other[0], runs[0][0])  # another seed, other draws


def test_bad_negative_draws():
    with pytest.raises(ValueError, match="for source 0 in 100 draws"):
        draw_negative_destinations(np.array([1, 0]), 3, 0, edges=EdgeSet([0, 0, 0], [0, 1, 2], 3))
    with pytest.raises(ValueError, match="no negative pair that is not an edge found for 4 of 4"):
        draw_negative_pairs(4, 1, 2, 0, edges=EdgeSet([0, 0], [0, 1], 2))
    by_time = NodesByTime(np.array([5, 7, 9]))
    with pytest.raises(ValueError, match="no node is as early as time 4"):
        draw_negative_destinations(np.array([0, 1]), 3, 0, np.array([6, 4]), by_time)
    with pytest.raises(ValueError, match=r"needs each negative's 'times'"):
        draw_negative_pairs(2, 3, 3, 0, src_by_time=by_time)
    with pytest.raises(ValueError, match=r"'times' must be integer times of shape \(2,\)"):
        draw_negative_pairs(2, 3, 3, 0, np.array([6.0, 7.0]), by_time)
    with pytest.raises(ValueError, match="'num_dst' is 0"):
        draw_negative_pairs(2, 3, 0, 0)
    with pytest.raises(ValueError, match="'count' must be an int >= 0"):
        draw_negative_pairs(-1, 3, 3, 0)
    with pytest.raises(ValueError, match="hold 3 nodes"):
        draw_negative_destinations(np.array([0]), 4, 0, np.array([9]), by_time)
    with pytest.raises(ValueError, match="over 3 destinations"):
        draw_negative_destinations(np.array([0]), 4, 0, edges=EdgeSet([0], [1], 3))
    with pytest.raises(ValueError, match="'sources' holds node id -1"):
        draw_negative_destinations(np.array([-1]), 4, 0)
    with pytest.raises(ValueError, match="'node_time' must be a 1-D array of integer times"):
        NodesByTime(np.array([0.5]))
    with pytest.raises(ValueError, match="overflow int64"):
        EdgeSet([2**40], [0], 2**30)


def test_seed_edges_of_the_wrong_kind_are_refused():
    indptr, indices = np.array([0, 1, 2, 3]), np.array([1, 2, 0])
    sampler = NeighborSampler(indptr, indices, [1])

    def sample(row, col, label=None, time=None):
        inputs = EdgeSamplerInput(
            np.asarray(row), np.asarray(col), np.arange(len(row)), 0, label, time
        )
        return sample_from_edges(sampler, inputs, 3)

    with pytest.raises(TypeError, match=r"seed edges' 'row' must hold integer ids \(got float64"):
        sample([1.7], [0])
    with pytest.raises(TypeError, match=r"seed edges' 'col' must hold integer ids \(got float64"):
        sample([1], [0.5])
    with pytest.raises(ValueError, match=r"seed edges' 'row' must be 1-D \(got shape \(1, 1\)\)"):
        sample([[1]], [0])
    with pytest.raises(ValueError, match=r"'col' must hold one id per seed edge \(1\) \(got 2\)"):
        sample([1], [0, 2])
    with pytest.raises(ValueError, match=r"'label' must hold one entry per seed edge \(2\)"):
        sample([1, 2], [0, 1], label=np.ones(3, dtype=np.float32))
    with pytest.raises(ValueError, match=r"'time' must hold one entry per seed edge \(2\)"):
        sample([1, 2], [0, 1], time=np.ones(1, dtype=np.int64))
    out = sample([1, 2], [0, 1], label=np.array([3.0, 4.0], dtype=np.float32))
    assert out.edge_label.tolist() == [3.0, 4.0]


def test_edge_sets_refuse_ids_outside_their_range():
    with pytest.raises(ValueError, match=r"'row' holds node id -1, below 0"):
        EdgeSet([-1, 0], [0, 1], 3)
    with pytest.raises(ValueError, match=r"'col' holds node id 3, outside \[0, 3\)"):
        EdgeSet([0], [3], 3)
    with pytest.raises(ValueError, match=r"'col' holds node id -1, outside \[0, 3\)"):
        EdgeSet([1], [-1], 3)
    with pytest.raises(TypeError, match=r"'row' must hold integer ids \(got float64"):
        EdgeSet([0.5], [1], 3)
    with pytest.raises(ValueError, match=r"'row' and 'col' must be 1-D and of one length"):
        EdgeSet([0, 1], [1], 3)
    edges = EdgeSet([2, 0], [1, 2], 3)
    assert edges.contains(np.array([2, 0, 1]), np.array([1, 2, 0])).tolist() == [True, True, False]


@pytest.mark.parametrize("disjoint", [False, True], ids=["shared", "disjoint"])
@pytest.mark.parametrize("negative", NEGATIVES)
def test_transform_sampler_output_sees_pygs_link_output(negative, disjoint):
    """PyG's filtering of our output as PyG's SamplerOutput gives our batch; the function
    sees (and may change) the link fields in 'metadata', as in PyG."""
    data = id_graph()
    options = {"batch_size": 20, "seed": 1, "neg_sampling": negative, "disjoint": disjoint}
    plain = LinkNeighborLoader(data, [2, 2], **options)(torch.arange(20))
    seen = []

    def record(out):
        seen.append(out)
        return out

    through = LinkNeighborLoader(data, [2, 2], transform_sampler_output=record, **options)
    assert_same_batch(plain, through(torch.arange(20)))
    assert isinstance(seen[0], PyGSamplerOutput) and torch.equal(seen[0].node, plain.n_id)
    assert torch.equal(seen[0].metadata[0], torch.arange(20))

    def shift(out):
        out.metadata = (out.metadata[0] + 100, *out.metadata[1:])
        return out

    shifted = LinkNeighborLoader(data, [2, 2], transform_sampler_output=shift, **options)
    assert torch.equal(shifted(torch.arange(20)).input_id, torch.arange(20) + 100)


class EdgeSampleWithOurs(PyGBaseSampler):
    """A PyG sampler: PyG's own edge_sample (its negatives, its layout) around our node
    sampler's draws."""

    def __init__(self, sampler, num_nodes: int, edge_ids: np.ndarray | None):
        self.sampler = sampler
        self.num_nodes = num_nodes
        self.perm = None if edge_ids is None else torch.from_numpy(edge_ids)

    def sample_from_nodes(self, index, **kwargs):
        raise NotImplementedError

    def sample_from_edges(self, inputs, neg_sampling=None):
        return pyg_edge_sample(inputs, self._sample, self.num_nodes, False, None, neg_sampling)

    def _sample(self, seed, seed_time):
        out = self.sampler.sample_from_nodes(
            SamplerInput(seed.numpy(), np.arange(seed.numel()), derive_seed(0, -1))
        )
        return PyGSamplerOutput(
            *(torch.from_numpy(v) for v in (out.node, out.row, out.col, out.edge)),
            num_sampled_nodes=list(out.num_sampled_nodes),
            num_sampled_edges=list(out.num_sampled_edges),
        )

    @property
    def edge_permutation(self):
        return self.perm


def test_pyg_samplers_sample_the_links():
    """A PyG sampler is called as PyG's LinkLoader calls it and filtered by PyG's rules:
    without negatives, the batch of our own sampling; with them, PyG's own draws."""
    data = id_graph(seed=7)
    graph = Graph.from_data(data)
    sampler = NeighborSampler(graph.indptr, graph.indices, [2, 2])
    pyg = EdgeSampleWithOurs(sampler, data.num_nodes, graph.edge_ids)
    ours = LinkNeighborLoader(data, [2, 2], batch_size=20, neighbor_sampler=sampler)
    theirs = LinkNeighborLoader(data, [2, 2], batch_size=20, neighbor_sampler=pyg)
    assert_same_batch(ours(torch.arange(20)), theirs(torch.arange(20)))
    triplet = LinkNeighborLoader(
        data, [2, 2], batch_size=20, neighbor_sampler=pyg, neg_sampling=("triplet", 3)
    )
    batch = triplet(torch.arange(20))
    src, dst = data.edge_index[:, :20]
    assert torch.equal(batch.n_id[batch.src_index], src)
    assert torch.equal(batch.n_id[batch.dst_pos_index], dst)
    assert batch.dst_neg_index.shape == (20, 3)
    with pytest.raises(NotImplementedError, match="'exclude_edges' negatives"):
        strict = NegativeSampling("binary", 1, exclude_edges=True)
        LinkNeighborLoader(data, [2], neighbor_sampler=pyg, neg_sampling=strict)
    with pytest.raises(TypeError, match="'transform_sampler_output' must be callable"):
        LinkNeighborLoader(data, [2], transform_sampler_output="shift")


def test_pyg_weighted_negatives_shift_labels_as_pygs_link_loader():
    """PyG's NegativeSampling with node weights goes to a PyG sampler as it is, and the given
    labels holding 0 are shifted by one as PyG's own LinkLoader shifts them."""
    data = id_graph(seed=8)
    graph = Graph.from_data(data)
    pyg = EdgeSampleWithOurs(
        NeighborSampler(graph.indptr, graph.indices, [2, 2]), data.num_nodes, graph.edge_ids
    )
    labels = torch.arange(data.num_edges) % 3
    weight = (torch.arange(data.num_nodes) < 5).float()  # negatives among nodes 0..4 only
    negative = PyGNegativeSampling("binary", 2, src_weight=weight, dst_weight=weight)
    options = {"edge_label": labels, "neg_sampling": negative, "batch_size": 20}
    torch.manual_seed(0)
    ours = LinkNeighborLoader(data, [2, 2], neighbor_sampler=pyg, **options)(torch.arange(20))
    torch.manual_seed(0)
    theirs = PyGLinkLoader(data, pyg, **options)(torch.arange(20))
    assert_same_batch(ours, theirs)
    assert torch.equal(ours.edge_label, torch.cat([labels[:20] + 1, torch.zeros(40).long()]))
    assert ours.n_id[ours.edge_label_index[:, 20:]].max() < 5


def test_pygs_tuple_and_dict_negatives_are_cast_as_pyg_casts_them():
    data = id_graph()
    options = {"batch_size": 20, "seed": 4}
    expected = LinkNeighborLoader(data, [2], neg_sampling=NegativeSampling("binary", 2), **options)
    for spelling in (("binary", 2), {"mode": "binary", "amount": 2}):
        loader = LinkNeighborLoader(data, [2], neg_sampling=spelling, **options)
        assert_same_batch(expected(torch.arange(20)), loader(torch.arange(20)))
    strict = {"mode": "triplet", "amount": 2, "exclude_edges": True}
    batch = LinkNeighborLoader(data, [2], neg_sampling=strict, **options)(torch.arange(20))
    negatives = torch.stack(
        [batch.n_id[batch.src_index].repeat(2, 1).t(), batch.n_id[batch.dst_neg_index]]
    )
    true = set(map(tuple, data.edge_index.t().tolist()))
    assert not any(tuple(p) in true for p in negatives.reshape(2, -1).t().tolist())
    weight = (torch.arange(data.num_nodes) % 10 == 3).float()  # nodes 3, 13, 23, ... only
    weighted = LinkNeighborLoader(data, [2], neg_sampling=("binary", 2, weight, weight), **options)
    batch = weighted(torch.arange(20))
    negatives = batch.n_id[batch.edge_label_index[:, 20:]]
    assert negatives.shape == (2, 40) and (negatives % 10 == 3).all()


def sorted_data_and_stores(seed=0, num_nodes=200, num_edges=1500):
    """A Data (features and times per node) whose edges are sorted by destination, and the
    same graph as a PyG store pair marked sorted, so that both keep one CSC order."""
    generator = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(0, num_nodes, (2, num_edges), generator=generator)
    edge_index = edge_index[:, edge_index[1].argsort(stable=True)]
    x = torch.arange(num_nodes, dtype=torch.float32).view(-1, 1)
    time = torch.randint(0, 50, (num_nodes,), generator=generator)
    data = Data(x=x, time=time, edge_index=edge_index, num_nodes=num_nodes)
    feature_store, graph_store = MyFeatureStore(), MyGraphStore()
    feature_store.put_tensor(x, group_name=None, attr_name="x", index=None)
    feature_store.put_tensor(time, group_name=None, attr_name="time", index=None)
    graph_store.put_edge_index(
        edge_index, edge_type=None, layout="coo", size=(num_nodes, num_nodes), is_sorted=True
    )
    return data, (feature_store, graph_store)


@pytest.mark.parametrize("temporal", [False, True], ids=["static", "temporal"])
@pytest.mark.parametrize("negative", STORE_NEGATIVES)
def test_store_pairs_give_the_batches_of_their_data(negative, temporal):
    data, stores = sorted_data_and_stores()
    seeds = data.edge_index[:, 100:400]
    options = {"edge_label_index": seeds, "batch_size": 64, "seed": 3, "neg_sampling": negative}
    if temporal:  # the store's table 'time' holds node times, as PyG reads it
        options["edge_label_time"] = torch.maximum(data.time[seeds[0]], data.time[seeds[1]]) + 5
        options["time_attr"] = "time"
    pairs = zip(
        LinkNeighborLoader(data, [3, 2], **options),
        LinkNeighborLoader(stores, [3, 2], **options),
        strict=True,
    )
    for in_memory, remote in pairs:
        assert_same_batch(in_memory, remote)
        assert torch.equal(remote.x[:, 0].long(), remote.n_id)
        num_pos = remote.input_id.numel()
        if "src_index" in remote:
            src, dst = remote.src_index, remote.dst_pos_index
        else:
            src, dst = remote.edge_label_index[:, :num_pos]
        assert torch.equal(remote.n_id[src], seeds[0, remote.input_id])
        assert torch.equal(remote.n_id[dst], seeds[1, remote.input_id])


@pytest.mark.parametrize("layout", ["coo", "csr", "csc"])
def test_all_edges_of_a_store_seed_in_the_order_of_their_ids(layout):
    """(None, None) seeds every edge, as graph_store.coo() lists them (PyG's reading), and
    excluded negatives are never one of them (brute force)."""
    feature_store, graph_store, (row, col) = homogeneous_stores(layout=layout, seed=2)
    negative = NegativeSampling("binary", 3, exclude_edges=True)
    loader = LinkNeighborLoader(
        (feature_store, graph_store),
        [1],
        edge_label_index=(None, None),
        batch_size=row.shape[0],
        neg_sampling=negative,
    )
    batch = loader(torch.arange(row.shape[0]))
    ends = batch.n_id[batch.edge_label_index]
    assert torch.equal(ends[:, : row.shape[0]], torch.from_numpy(np.stack([row, col])))
    assert torch.equal(ends[:, : row.shape[0]], torch.stack(graph_store.coo()[:2]))
    true = set(zip(row.tolist(), col.tolist(), strict=True))
    assert not any(tuple(p) in true for p in ends[:, row.shape[0] :].t().tolist())


def test_pyg_samplers_sample_store_pairs_as_pygs_loader():
    """A PyG sampler over a store pair: the batch of PyG's own LinkNeighborLoader (its
    draws, from torch's generator; its filtering of the pair)."""
    pytest.importorskip("torch_sparse")
    from torch_geometric.loader import LinkNeighborLoader as PyGLinkNeighborLoader
    from torch_geometric.sampler import NeighborSampler as PyGNeighborSampler

    data, stores = sorted_data_and_stores(seed=1)
    options = {
        "edge_label_index": (None, data.edge_index[:, :64]),
        "batch_size": 64,
        "neighbor_sampler": PyGNeighborSampler(stores, [3, 2]),
    }
    for negative in (None, "binary", ("triplet", 2)):
        torch.manual_seed(0)
        ours = LinkNeighborLoader(stores, [3, 2], neg_sampling=negative, **options)
        ours = ours(torch.arange(64))
        torch.manual_seed(0)
        theirs = PyGLinkNeighborLoader(stores, [3, 2], neg_sampling=negative, **options)
        assert_same_batch(ours, theirs(torch.arange(64)))


@pytest.mark.parametrize("negative", NEGATIVES)
def test_transform_sampler_output_over_store_pairs(negative):
    _, stores = sorted_data_and_stores(seed=2)
    options = {"edge_label_index": (None, None), "batch_size": 30, "seed": 1}
    options["neg_sampling"] = negative
    plain = LinkNeighborLoader(stores, [2, 2], **options)(torch.arange(30))
    seen = []

    def record(out):
        seen.append(out)
        return out

    through = LinkNeighborLoader(stores, [2, 2], transform_sampler_output=record, **options)
    assert_same_batch(plain, through(torch.arange(30)))
    assert isinstance(seen[0], PyGSamplerOutput) and torch.equal(seen[0].node, plain.n_id)
