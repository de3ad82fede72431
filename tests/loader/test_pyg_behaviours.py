"""What PyG's loaders do that users and PyG's own examples rely on: ``loader.dataset``, and
attributes deleted from or added to ``loader.data`` after the loader is built."""

import copy

import pytest
import torch
from torch_geometric.data import Data

from graphengine.loader import ClusterData, ClusterLoader, LinkNeighborLoader, NeighborLoader
from tests.helpers.graphs import id_graph


def test_len_of_dataset_counts_what_the_loader_batches():
    data = id_graph()
    assert len(NeighborLoader(data, [2], batch_size=7).dataset) == data.num_nodes
    seeds = NeighborLoader(data, [2], input_nodes=torch.arange(10, 40), batch_size=7)
    assert len(seeds.dataset) == 30 and len(seeds) == 5
    links = LinkNeighborLoader(data, [2], edge_label_index=data.edge_index[:, :50], batch_size=8)
    assert len(links.dataset) == 50
    assert len(ClusterLoader(ClusterData(data, 6), batch_size=2).dataset) == 6


def test_attributes_deleted_or_added_after_building_are_honoured():
    """PyG's examples/reddit.py: an inference loader over a copy of the data, whose ``x`` and
    ``y`` are deleted and ``n_id`` added once the loader exists."""
    data = id_graph()
    loader = NeighborLoader(copy.copy(data), [-1], batch_size=50, shuffle=False)
    del loader.data.x, loader.data.y
    loader.data.n_id = torch.arange(data.num_nodes)
    loader.data.z = torch.arange(data.num_nodes) * 10
    for batch in loader:
        assert "x" not in batch and "y" not in batch
        torch.testing.assert_close(batch.z, batch.n_id * 10)
        torch.testing.assert_close(batch.edge_attr, batch.e_id.float())
    assert "x" in data  # the original data keeps them


def test_link_loading_over_a_data_without_edges():
    """PyG's samplers take a Data without ``edge_index`` as a graph without edges (its
    ``to_csc``): the batch holds the seed edges' ends and their negatives, nothing sampled."""
    data = Data(x=torch.arange(10.0).view(-1, 1), num_nodes=10)
    seeds = torch.tensor([[0, 1, 5], [2, 3, 9]])
    loader = LinkNeighborLoader(
        data, [2, 2], edge_label_index=seeds, batch_size=3, neg_sampling="binary", seed=0
    )
    batch = next(iter(loader))
    assert batch.edge_index.shape == (2, 0) and batch.e_id.numel() == 0
    pairs = batch.n_id[batch.edge_label_index]
    assert torch.equal(pairs[:, :3], seeds) and batch.edge_label.tolist() == [1, 1, 1, 0, 0, 0]
    torch.testing.assert_close(batch.x.view(-1), batch.n_id.float())
    assert next(iter(NeighborLoader(data, [2], batch_size=4))).edge_index.shape == (2, 0)
    with pytest.raises(ValueError, match="'edge_label_index' is needed: the data has no"):
        LinkNeighborLoader(data, [2], batch_size=3)
