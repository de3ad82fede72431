"""A ``Data`` whose per-node or per-edge attribute has the wrong row count is refused by
every loader that takes a ``Data``, instead of being copied whole into every batch."""

import pytest
import torch

from graphengine.loader import (
    ClusterData,
    GraphSAINTNodeSampler,
    LinkNeighborLoader,
    NeighborLoader,
)
from tests.helpers.graphs import id_graph, id_hetero


def loaders():
    return {
        "NeighborLoader": lambda d: NeighborLoader(d, [2], batch_size=4),
        "LinkNeighborLoader": lambda d: LinkNeighborLoader(d, [2], batch_size=4),
        "ClusterData": lambda d: ClusterData(d, 4),
        "GraphSAINTNodeSampler": lambda d: GraphSAINTNodeSampler(d, 10, log=False),
    }


@pytest.mark.parametrize("loader", sorted(loaders()))
@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        ("x", torch.zeros(299, 3), r"'data\.x' has 299 rows, but the data has 300 nodes"),
        ("y", torch.zeros(301), r"'data\.y' has 301 rows, but the data has 300 nodes"),
        ("train_mask", torch.ones(30, dtype=torch.bool), r"'data\.train_mask' has 30 rows"),
        ("edge_attr", torch.zeros(2999), r"'data\.edge_attr' has 2999 rows, .* 3000 edges"),
        ("edge_weight", torch.ones(1), r"'data\.edge_weight' has 1 rows, .* 3000 edges"),
    ],
)
def test_attribute_of_the_wrong_length_is_refused(loader, key, value, match):
    data = id_graph()
    data[key] = value
    with pytest.raises(ValueError, match=match):
        loaders()[loader](data)


def test_a_graph_level_label_is_still_taken():
    data = id_graph()
    data.y = torch.tensor([5])
    batch = next(iter(NeighborLoader(data, [2], batch_size=4)))
    assert batch.y.tolist() == [5]


CITES = ("paper", "cites", "paper")


def hetero_loaders():
    return {
        "NeighborLoader": lambda d: NeighborLoader(d, [2], input_nodes="paper", batch_size=4),
        "LinkNeighborLoader": lambda d: LinkNeighborLoader(
            d, [2], edge_label_index=(CITES, None), batch_size=4
        ),
    }


@pytest.mark.parametrize("loader", sorted(hetero_loaders()))
@pytest.mark.parametrize(
    ("store", "key", "value", "match"),
    [
        (
            "paper",
            "x",
            torch.zeros(100, 1),
            r"'data\['paper'\]\.x' has 100 rows, but node type 'paper' has 120 nodes",
        ),
        ("author", "y", torch.zeros(81), r"'data\['author'\]\.y' has 81 rows, .* 80 nodes"),
        (
            CITES,
            "edge_attr",
            torch.zeros(599),
            r"'data\[\('paper', 'cites', 'paper'\)\]\.edge_attr' has 599 rows, but edge type "
            r"\('paper', 'cites', 'paper'\) has 600 edges",
        ),
    ],
)
def test_hetero_attribute_of_the_wrong_length_is_refused(loader, store, key, value, match):
    """On a HeteroData each type's attribute is checked against that type's count: PyG takes
    a mismatched one for a type-level attribute and hands every batch all of its rows."""
    data = id_hetero()
    if isinstance(store, str):  # a node type: its count set, so that x does not define it
        data[store].num_nodes = data[store].num_nodes
    data[store][key] = value
    with pytest.raises(ValueError, match=match):
        hetero_loaders()[loader](data)
