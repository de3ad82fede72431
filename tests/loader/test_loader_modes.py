"""NeighborLoader's sampling modes as PyG users call them, on graphs whose features are node
ids and whose edge attributes are edge ids, so that every batch checks itself."""

import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.sampler import SamplerOutput as PygSamplerOutput
from torch_geometric.sampler.base import SubgraphType

from graphengine import LaborLoader, NeighborLoader
from tests.helpers.batches import check_batch
from tests.helpers.graphs import id_graph


@pytest.mark.parametrize("num_workers", [0, 2])
def test_disjoint_batches_carry_the_tree_of_every_node(num_workers):
    data = id_graph()
    loader = NeighborLoader(
        data, [4, 3], batch_size=16, disjoint=True, seed=1, num_workers=num_workers
    )
    for batch in loader:
        check_batch(batch, data)
        assert torch.equal(batch.batch[: batch.batch_size], torch.arange(batch.batch_size))
        assert torch.equal(batch.batch[batch.edge_index[0]], batch.batch[batch.edge_index[1]])
        pairs = batch.batch * data.num_nodes + batch.n_id
        assert pairs.unique().numel() == batch.num_nodes


def test_pyg_subgraph_types_and_directed_flag():
    data = id_graph()
    directional = NeighborLoader(data, [5, 5], batch_size=20, seed=3)([0, 1, 2])
    induced = NeighborLoader(
        data, [5, 5], batch_size=20, seed=3, subgraph_type=SubgraphType.induced
    )([0, 1, 2])
    with pytest.warns(DeprecationWarning, match="subgraph_type='induced'"):
        legacy = NeighborLoader(data, [5, 5], batch_size=20, seed=3, directed=False)([0, 1, 2])
    assert torch.equal(induced.edge_index, legacy.edge_index)
    assert torch.equal(induced.n_id, directional.n_id)
    check_batch(induced, data)
    # Induced: exactly the edges of the graph between the batch's nodes (brute force).
    inside = torch.isin(data.edge_index, induced.n_id).all(0)
    assert induced.num_edges == int(inside.sum())
    assert "num_sampled_nodes" not in induced and "num_sampled_edges" not in induced

    both = NeighborLoader(data, [5, 5], batch_size=20, seed=3, subgraph_type="bidirectional")
    batch = both([0, 1, 2])
    assert torch.equal(batch.n_id, directional.n_id)
    pairs = set(map(tuple, directional.edge_index.t().tolist()))
    assert set(map(tuple, batch.edge_index.t().tolist())) == pairs | {(c, r) for r, c in pairs}


def test_weighted_loader_never_draws_zero_weight_edges():
    # PyG's own case: edges 1->2 and 4->3 carry weight, 3->2 and 0->1 none.
    data = Data(
        num_nodes=5,
        edge_index=torch.tensor([[1, 3, 0, 4], [2, 2, 1, 3]]),
        edge_weight=torch.tensor([0.0, 1.0, 0.0, 1.0]),
    )
    loader = NeighborLoader(
        data, input_nodes=torch.tensor([2]), num_neighbors=[1] * 2, weight_attr="edge_weight"
    )
    batch = next(iter(loader))
    assert batch.n_id.tolist() == [2, 3, 4]
    assert batch.n_id[batch.edge_index].tolist() == [[3, 4], [2, 3]]
    with pytest.raises(ValueError, match="no edge attribute 'nope'"):
        NeighborLoader(data, [1], weight_attr="nope")
    data.edge_weight[1] = -2.0
    with pytest.raises(ValueError, match="finite and >= 0"):
        NeighborLoader(data, [1], weight_attr="edge_weight")


@pytest.mark.parametrize("level", ["node", "edge"])
def test_temporal_loader_batches_hold_no_future(level):
    data = id_graph(seed=4)
    generator = torch.Generator().manual_seed(5)
    data.node_time = torch.randint(0, 100, (data.num_nodes,), generator=generator)
    data.edge_time = torch.randint(0, 100, (data.num_edges,), generator=generator)
    attr = f"{level}_time"
    input_time = torch.randint(30, 100, (data.num_nodes,), generator=generator)
    kwargs = {"input_time": input_time} if level == "edge" else {}
    loader = NeighborLoader(data, [5, 5], batch_size=32, time_attr=attr, seed=2, **kwargs)
    for batch in loader:
        check_batch(batch, data)
        if level == "edge":  # the given times, as PyG's seed_time
            seed_time = input_time[batch.input_id]
            assert torch.equal(batch.seed_time, seed_time)
        else:  # the seeds' own node times; PyG's batch then has no seed_time
            seed_time = batch.node_time[: batch.batch_size]
            assert "seed_time" not in batch
        limit = seed_time[batch.batch[batch.edge_index[1]]]
        when = batch.node_time[batch.edge_index[0]] if level == "node" else batch.edge_time
        assert (when <= limit).all()


def test_input_id_and_transform_sampler_output():
    data = id_graph()
    calls = []

    def drop_edges(out):
        assert isinstance(out, PygSamplerOutput)
        calls.append(out.node.numel())
        keep = out.row < out.col
        out.row, out.col, out.edge = out.row[keep], out.col[keep], out.edge[keep]
        out.num_sampled_nodes = out.num_sampled_edges = None
        return out

    loader = NeighborLoader(
        data,
        [3],
        batch_size=8,
        input_nodes=torch.arange(10, 26),
        input_id=torch.arange(100, 116),
        transform_sampler_output=drop_edges,
    )
    batches = list(loader)
    assert len(calls) == 2
    assert batches[1].input_id.tolist() == list(range(108, 116))
    for batch in batches:
        check_batch(batch, data)
        assert (batch.edge_index[0] < batch.edge_index[1]).all()


def test_labor_loader_batches_and_refusals():
    data = id_graph(num_nodes=400, num_edges=8000)
    labor = LaborLoader(data, [10, 10], batch_size=64, seed=0, importance_sampling=1)
    uniform = NeighborLoader(data, [10, 10], batch_size=64, seed=0)
    labor_nodes = uniform_nodes = 0
    for batch, reference in zip(labor, uniform, strict=True):
        check_batch(batch, data)
        assert batch.sampling_weight.shape == (batch.num_edges,)
        assert (batch.sampling_weight > 0).all()
        labor_nodes += batch.num_nodes
        uniform_nodes += reference.num_nodes
    assert labor_nodes < uniform_nodes  # seeds share the neighbors they keep
    with pytest.raises(ValueError, match="LaborLoader does not take weight_attr='edge_weight'"):
        LaborLoader(data, [5], weight_attr="edge_weight")
    with pytest.raises(ValueError, match="does not take disjoint=True"):
        LaborLoader(data, [5], disjoint=True)
