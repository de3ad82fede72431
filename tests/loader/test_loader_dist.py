"""DistNeighborLoader takes PyG's attribute names (``time_attr``, ``weight_attr``), resolved
from the part's stores: checked in a one-worker group against the values given and against
what temporal and weighted sampling promise."""

import numpy as np
import pytest
import torch.distributed as dist

from graphengine.data.graph_store import Graph
from graphengine.data.partition import partition_dataset
from graphengine.datasets.dataset import GraphDataset
from graphengine.distributed.data import DistData
from graphengine.loader import DistNeighborLoader

NUM_NODES, NUM_EDGES = 120, 900


def small_graph() -> GraphDataset:
    rng = np.random.default_rng(4)
    edge_index = rng.integers(0, NUM_NODES, (2, NUM_EDGES))
    order = rng.permutation(NUM_NODES)
    return GraphDataset(
        name="small",
        graph=Graph.from_edge_index(edge_index, NUM_NODES),
        x=rng.standard_normal((NUM_NODES, 3)).astype(np.float32),
        y=rng.integers(0, 2, NUM_NODES),
        train_idx=order[:60],
        val_idx=np.sort(order[60:90]),
        test_idx=np.sort(order[90:]),
        num_classes=2,
    )


@pytest.fixture
def one_part(tmp_path):
    dist.init_process_group(
        "gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1
    )
    try:
        partition_dataset(small_graph(), 1, tmp_path / "parts", method="random")
        yield DistData.open(tmp_path / "parts")
    finally:
        dist.destroy_process_group()


def test_node_times_by_name_from_the_feature_store(one_part):
    data = one_part
    times = np.random.default_rng(1).integers(0, 20, NUM_NODES)  # by original id
    local_to_orig = np.asarray(data.book.new_to_orig[data.part.start : data.part.stop])
    data.features.store["time"] = times[local_to_orig]
    loader = DistNeighborLoader(data, [3, 2], batch_size=16, seed=3, time_attr="time")
    np.testing.assert_array_equal(loader.sampler.node_time, times)
    batches = list(loader)
    assert len(batches) == 4
    for batch in batches:
        orig = data.book.to_orig(batch.n_id.numpy())
        seed_time = times[orig[: batch.batch_size]]  # a seed's own time, none given
        assert (times[orig] <= seed_time[batch.batch.numpy()]).all()  # nothing later


def test_edge_weights_by_name_from_the_part(one_part):
    data = one_part
    weights = np.random.default_rng(2).random(NUM_EDGES)  # by original edge id
    weights[::3] = 0.0
    data.part.edge_weight = weights[np.asarray(data.part.edge_ids)]
    loader = DistNeighborLoader(data, [4, 4], batch_size=20, seed=0, weight_attr="edge_weight")
    sampled = np.concatenate([batch.e_id.numpy() for batch in loader])
    assert sampled.size > 0
    assert (weights[sampled] > 0).all()  # a weight of zero is never drawn


def test_attribute_names_the_part_lacks_are_named(one_part):
    data = one_part
    with pytest.raises(ValueError, match="'time_attr': the part has no node table"):
        DistNeighborLoader(data, [2], time_attr="time")
    with pytest.raises(ValueError, match="'weight_attr': the part has no edge array"):
        DistNeighborLoader(data, [2], weight_attr="w")
    with pytest.raises(ValueError, match="'weight_attr': the part has no edge array"):
        DistNeighborLoader(data, [2], weight_attr="edge_ids")  # the layout's, not a weight
    data.part.edge_weight = np.ones(3)
    with pytest.raises(ValueError, match=r"edge array 'edge_weight' must have shape"):
        DistNeighborLoader(data, [2], weight_attr="edge_weight")
    with pytest.raises(ValueError, match="'subgraph_type' must be one of"):
        DistNeighborLoader(data, [2], subgraph_type="both")


def test_uint8_input_nodes_are_refused_as_neither_ids_nor_a_mask(one_part):
    """uint8 seeds were taken as ids; torch's old masks were uint8 (PyG refuses them)."""
    seeds = np.array([1, 0, 1], dtype=np.uint8)
    expected = r"'input_nodes' has dtype uint8, expected integer node ids \(int64\)"
    with pytest.raises(TypeError, match=expected):
        DistNeighborLoader(one_part, [2], input_nodes=seeds)
    loader = DistNeighborLoader(one_part, [2], input_nodes=seeds.astype(np.int64), batch_size=3)
    assert next(iter(loader)).batch_size == 3
