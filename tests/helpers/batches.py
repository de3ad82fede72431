"""Checks of loader batches drawn from the graphs of :mod:`tests.helpers.graphs`, and the
negative-sampling cases the link loaders are run with."""

import pytest
import torch

from samplers.link import NegativeSampling


def check_batch(batch, data):
    """Node attributes follow ``n_id``, edge attributes ``e_id``, and every edge exists."""
    assert torch.equal(batch.y, data.y[batch.n_id])
    assert torch.equal(batch.edge_attr, data.edge_attr[batch.e_id])
    src, dst = data.edge_index[:, batch.e_id]
    assert torch.equal(batch.n_id[batch.edge_index[0]], src)
    assert torch.equal(batch.n_id[batch.edge_index[1]], dst)


def check_hetero_batch(batch, data):
    """Per type, node features follow ``n_id``, edge attributes ``e_id``, and every edge exists."""
    for node_type in data.node_types:
        assert torch.equal(batch[node_type].x, data[node_type].x[batch[node_type].n_id])
    for edge_type in data.edge_types:
        src, _, dst = edge_type
        store = batch[edge_type]
        assert torch.equal(store.edge_attr, data[edge_type].edge_attr[store.e_id])
        original = data[edge_type].edge_index[:, store.e_id]
        assert torch.equal(batch[src].n_id[store.edge_index[0]], original[0])
        assert torch.equal(batch[dst].n_id[store.edge_index[1]], original[1])


def assert_same_batch(first, second):
    """Every store of two batches holds the same keys and values."""
    for mine, other in zip(first.stores, second.stores, strict=True):
        assert set(mine.keys()) == set(other.keys())
        for key, value in mine.items():
            if isinstance(value, torch.Tensor):
                assert torch.equal(value, other[key]), key
            else:
                assert value == other[key], key


NEGATIVES = [
    pytest.param(None, id="none"),
    pytest.param("binary", id="binary"),
    pytest.param(NegativeSampling("triplet", 2), id="triplet"),
]

STORE_NEGATIVES = [
    *NEGATIVES,
    pytest.param(NegativeSampling("binary", 2, exclude_edges=True), id="exclude"),
]
