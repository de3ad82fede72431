"""NeighborLoader on heterogeneous graphs and on PyG's remote stores, as PyG users call it,
on graphs whose features are node ids, so that every batch checks itself."""

import numpy as np
import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.nn import SAGEConv, to_hetero
from torch_geometric.testing import MyFeatureStore, MyGraphStore

from graphengine import NeighborLoader
from tests.helpers.batches import check_hetero_batch
from tests.helpers.graphs import EDGE_TYPES, id_hetero


@pytest.mark.parametrize("num_workers", [0, 2])
def test_hetero_batches_follow_pyg_layout(num_workers):
    data = id_hetero()
    train = torch.arange(0, 120, 2)
    loader = NeighborLoader(
        data,
        num_neighbors={EDGE_TYPES[0]: [3, 2], EDGE_TYPES[1]: [4, 0], EDGE_TYPES[2]: [2, 2]},
        input_nodes=("paper", train),
        batch_size=16,
        seed=1,
        num_workers=num_workers,
    )
    assert len(loader) == 4
    seen = []
    for batch in loader:
        check_hetero_batch(batch, data)
        size = batch["paper"].batch_size
        seeds = batch["paper"].n_id[:size]
        seen.append(seeds)
        assert torch.equal(seeds, train[batch["paper"].input_id])
        # Per-type fanouts at hop 0: each seed has at most 3 cites and 4 writes in-edges.
        hop0 = batch["paper", "cites", "paper"].num_sampled_edges[0]
        cites_dst = batch["paper", "cites", "paper"].edge_index[1, :hop0]
        assert np.bincount(cites_dst.numpy(), minlength=size).max() <= 3
        assert batch["author", "writes", "paper"].num_sampled_edges[1] == 0
    assert torch.equal(torch.cat(seen), train)


def test_hetero_disjoint_and_temporal():
    data = id_hetero(seed=2)
    loader = NeighborLoader(
        data, [3, 3], input_nodes="paper", time_attr="time", batch_size=10, seed=3
    )
    for batch in loader:
        check_hetero_batch(batch, data)
        assert "seed_time" not in batch["paper"]  # as PyG: only given times are kept
        seed_time = data["paper"].time[batch["paper"].n_id[: batch["paper"].batch_size]]
        for src, rel, dst in data.edge_types:
            row, col = batch[src, rel, dst].edge_index
            tree = batch[dst].batch[col]
            assert torch.equal(batch[src].batch[row], tree)  # disjoint trees
            assert (batch[src].time[row] <= seed_time[tree]).all()  # no future


def test_data_and_remote_stores_give_identical_batches():
    data = id_hetero(seed=4)
    # Edges sorted by destination and marked so: the store then keeps their order within a
    # destination in its CSC, as the in-memory graph does, so both sample the same edges.
    for edge_type in data.edge_types:
        edge_index = data[edge_type].edge_index
        data[edge_type].edge_index = edge_index[:, edge_index[1].argsort(stable=True)]
    feature_store, graph_store = MyFeatureStore(), MyGraphStore()
    for node_type in data.node_types:
        feature_store.put_tensor(data[node_type].x, group_name=node_type, attr_name="x", index=None)
    for edge_type in data.edge_types:
        src, _, dst = edge_type
        size = (data[src].num_nodes, data[dst].num_nodes)
        graph_store.put_edge_index(
            data[edge_type].edge_index, edge_type=edge_type, layout="coo", size=size, is_sorted=True
        )
    args = dict(num_neighbors=[4, 3], input_nodes="paper", batch_size=32, seed=7)
    for in_memory, remote in zip(
        NeighborLoader(data, **args),
        NeighborLoader((feature_store, graph_store), **args),
        strict=True,
    ):
        for node_type in data.node_types:
            assert torch.equal(in_memory[node_type].n_id, remote[node_type].n_id)
            assert torch.equal(in_memory[node_type].x, remote[node_type].x)
        for edge_type in data.edge_types:
            assert torch.equal(in_memory[edge_type].edge_index, remote[edge_type].edge_index)
            assert torch.equal(in_memory[edge_type].e_id, remote[edge_type].e_id)


def test_to_hetero_graphsage_trains_on_hetero_batches():
    torch.manual_seed(0)
    data = id_hetero(seed=5)
    # Labels the model can only learn from neighbors: the parity of the number of cites.
    cites_in = torch.bincount(data["paper", "cites", "paper"].edge_index[1], minlength=120)
    data["paper"].y = (cites_in > cites_in.median()).long()
    data["paper"].x = torch.ones(120, 4)
    data["author"].x = torch.ones(80, 4)

    class Base(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = SAGEConv((-1, -1), 16, aggr="sum")
            self.conv2 = SAGEConv((-1, -1), 2, aggr="sum")

        def forward(self, x, edge_index):
            return self.conv2(self.conv1(x, edge_index).relu(), edge_index)

    model = to_hetero(Base(), data.metadata(), aggr="sum")
    loader = NeighborLoader(
        data, [-1, -1], input_nodes="paper", batch_size=40, shuffle=True, seed=0
    )
    with torch.no_grad():
        model(next(iter(loader)).x_dict, next(iter(loader)).edge_index_dict)  # lazy shapes
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for _ in range(30):
        for batch in loader:
            optimizer.zero_grad()
            out = model(batch.x_dict, batch.edge_index_dict)["paper"][: batch["paper"].batch_size]
            loss = torch.nn.functional.cross_entropy(
                out, batch["paper"].y[: batch["paper"].batch_size]
            )
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    assert np.mean(losses[-3:]) < 0.6 * np.mean(losses[:3])


def test_hetero_bad_input():
    data = id_hetero()
    with pytest.raises(ValueError, match="must name the seeds' node type"):
        NeighborLoader(data, [2])
    with pytest.raises(ValueError, match="node type 'venue'"):
        NeighborLoader(data, [2], input_nodes="venue")
    with pytest.raises(ValueError, match="hops must be the same across all"):
        NeighborLoader(
            data,
            {EDGE_TYPES[0]: [1], EDGE_TYPES[1]: [1, 1], EDGE_TYPES[2]: [1, 1]},
            input_nodes="paper",
        )
    with pytest.raises(ValueError, match="'input_nodes' holds node id 500"):
        NeighborLoader(data, [2], input_nodes=("paper", torch.tensor([1, 500])))


def test_homogeneous_data_and_remote_stores_give_identical_batches():
    generator = torch.Generator().manual_seed(6)
    edge_index = torch.randint(0, 200, (2, 1500), generator=generator)
    edge_index = edge_index[:, edge_index[1].argsort(stable=True)]  # sorted, as the store keeps it
    x = torch.arange(200, dtype=torch.float32).view(-1, 1)
    data = Data(x=x, edge_index=edge_index, num_nodes=200)
    feature_store, graph_store = MyFeatureStore(), MyGraphStore()
    feature_store.put_tensor(x, group_name=None, attr_name="x", index=None)
    graph_store.put_edge_index(
        edge_index, edge_type=None, layout="coo", size=(200, 200), is_sorted=True
    )
    args = dict(num_neighbors=[5, 3], input_nodes=torch.arange(0, 200, 3), batch_size=16, seed=2)
    pairs = zip(
        NeighborLoader(data, **args),
        NeighborLoader((feature_store, graph_store), **args),
        strict=True,
    )
    for in_memory, remote in pairs:
        for key in ("n_id", "x", "edge_index", "e_id", "input_id"):
            assert torch.equal(in_memory[key], remote[key]), key
        assert remote.batch_size == in_memory.batch_size


def test_hetero_batches_keep_type_and_graph_level_attributes():
    data = id_hetero()
    data["paper"].label_names = ["a", "b", "c"]
    data["paper", "cites", "paper"].relation_weight = 0.5
    data.title = "graph"
    batch = NeighborLoader(data, [2], input_nodes="paper", batch_size=8)([0, 1])
    assert batch["paper"].label_names == ["a", "b", "c"]
    assert batch["paper", "cites", "paper"].relation_weight == 0.5
    assert batch.title == "graph"


def test_input_nodes_of_the_wrong_kind_for_the_data_are_named():
    hetero = id_hetero()
    with pytest.raises(
        TypeError, match=r"'input_nodes' node type must be a str \(got \['paper'\]\)"
    ):
        NeighborLoader(hetero, [2], input_nodes=(["paper"], torch.tensor([1])))
    with pytest.raises(
        TypeError, match=r"'input_nodes' node type must be a str \(got \['paper'\]\)"
    ):
        NeighborLoader(hetero, [2], input_nodes=[["paper"], None])
    batch = next(iter(NeighborLoader(hetero, [2], input_nodes=["paper", torch.tensor([4])])))
    assert batch["paper"].n_id[:1].tolist() == [4]
    data = Data(x=torch.arange(6.0).view(-1, 1), edge_index=torch.tensor([[0, 1], [1, 2]]))
    expected = (
        r"'input_nodes' must be ids, a mask or None for homogeneous data; a \(node type, ids\) "
        r"pair is for HeteroData \(got \(None, tensor\(\[0, 1\]\)\)\)"
    )
    with pytest.raises(ValueError, match=expected):
        NeighborLoader(data, [2], input_nodes=(None, torch.tensor([0, 1])))
    with pytest.raises(ValueError, match=r"a \(node type, ids\) pair is for HeteroData"):
        NeighborLoader(data, [2], input_nodes=("paper", None))
    with pytest.raises(ValueError, match=r"a node type is for HeteroData \(got 'paper'\)"):
        NeighborLoader(data, [2], input_nodes="paper")
    pair = NeighborLoader(data, [2], input_nodes=(2, 3), batch_size=2)
    assert next(iter(pair)).n_id[:2].tolist() == [2, 3]
