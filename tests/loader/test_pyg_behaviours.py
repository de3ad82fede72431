"""What PyG's loaders do that users and PyG's own examples rely on: ``loader.dataset``, and
attributes deleted from or added to ``loader.data`` after the loader is built."""

import copy

import torch

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
