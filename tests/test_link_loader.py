"""LinkNeighborLoader as PyG users call it, on graphs whose features are node ids: seed edges,
negatives (uniform, optionally never a true edge, never later than their edge) and labels,
checked by brute force and against PyG's own edge_sample."""

import math

import numpy as np
import pytest
import torch
from scipy.stats import chisquare
from torch_geometric.data import HeteroData
from torch_geometric.sampler import EdgeSamplerInput as PyGEdgeSamplerInput
from torch_geometric.sampler import SamplerOutput as PyGSamplerOutput
from torch_geometric.sampler.neighbor_sampler import edge_sample as pyg_edge_sample

from graphengine import Graph, LinkNeighborLoader
from graphengine.loader.seeds import derive_seed
from samplers import NeighborSampler, SamplerInput
from samplers.link import NegativeSampling
from tests.test_loader import id_graph
from tests.test_loader_modes import check_batch


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
    with pytest.raises(NotImplementedError, match="homogeneous PyG Data"):
        LinkNeighborLoader(HeteroData(), [2])
    with pytest.raises(ValueError, match=r"shape \[2, num_edges\]"):
        LinkNeighborLoader(data, [2], edge_label_index=torch.zeros(3, 4, dtype=torch.long))
