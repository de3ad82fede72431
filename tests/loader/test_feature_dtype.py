"""Batches from a float16 feature table: float32 by default, equal to the float32 table's rows
rounded through float16 (NumPy's ``astype`` as the reference); ``feature_dtype`` keeps half."""

import dataclasses

import numpy as np
import pytest
import torch

from graphengine import FeatureStore, LinkNeighborLoader, NeighborLoader
from graphengine.data.feature_dtype import as_batch_dtype
from graphengine.datasets.synthetic import SyntheticSpec, generate
from graphengine.loader.stages import GatherFeatures
from samplers import SamplerOutput
from tests.helpers.graphs import id_graph, id_hetero


@pytest.fixture(scope="module")
def single():
    return generate("s", SyntheticSpec(400, 4000, 6, 3, 100, 50, seed=3))


def half(dataset):
    return dataclasses.replace(dataset, x=dataset.x.astype(np.float16))


def batches(data, **options):
    loader = NeighborLoader(data, [4, 3], batch_size=64, seed=7, num_workers=0, **options)
    return list(loader)


def test_a_half_store_gives_float32_rows_equal_to_the_rows_rounded_through_float16(single):
    full, compact = batches(single), batches(half(single))
    assert len(full) == len(compact) > 1
    for expected, batch in zip(full, compact, strict=True):
        assert torch.equal(batch.n_id, expected.n_id)
        assert batch.x.dtype == torch.float32
        reference = expected.x.numpy().astype(np.float16).astype(np.float32)
        np.testing.assert_array_equal(batch.x.numpy(), reference)
        assert torch.equal(batch.y, expected.y)  # labels are not features: as they are


def test_feature_dtype_float16_keeps_half_rows(single):
    (batch, *_) = batches(half(single), feature_dtype=torch.float16)
    assert batch.x.dtype == torch.float16
    np.testing.assert_array_equal(batch.x.numpy(), single.x[batch.n_id.numpy()].astype(np.float16))
    assert batch.y.dtype == torch.int64


def test_a_store_pair_gives_float32_rows_of_half_node_and_edge_tables(single):
    store = FeatureStore({"x": single.x.astype(np.float16)})
    (batch, *_) = batches((store, single.graph))
    assert batch.x.dtype == torch.float32
    np.testing.assert_array_equal(
        batch.x.numpy(), single.x[batch.n_id.numpy()].astype(np.float16).astype(np.float32)
    )
    edge_feature = np.linspace(-3, 3, 50).astype(np.float16)
    gather = GatherFeatures(
        FeatureStore({"x": store["x"]}), edges=FeatureStore({"edge_attr": edge_feature})
    )
    edge = np.array([7, 0, 49], dtype=np.int64)
    out = SamplerOutput(
        node=np.array([2, 5], dtype=np.int64),
        row=np.array([0, 1, 1], dtype=np.int64),
        col=np.array([1, 0, 0], dtype=np.int64),
        edge=edge,
        num_sampled_nodes=(1, 1),
        num_sampled_edges=(3,),
        batch_size=1,
        input_id=np.arange(1),
    )
    batch = gather(out)
    assert batch.edge_attr.dtype == torch.float32
    np.testing.assert_array_equal(batch.edge_attr.numpy(), edge_feature[edge].astype(np.float32))


def test_hetero_half_features_come_as_float32_unless_asked():
    data = id_hetero()
    data["paper"].x = data["paper"].x.half()
    loader = NeighborLoader(data, [3, 2], input_nodes="paper", batch_size=16, seed=1, num_workers=0)
    batch = next(iter(loader))
    assert batch["paper"].x.dtype == torch.float32
    np.testing.assert_array_equal(
        batch["paper"].x[:, 0].numpy(), batch["paper"].n_id.numpy().astype(np.float32)
    )
    assert batch["author"].x.dtype == torch.float32  # a float32 table as it is
    kept = NeighborLoader(
        data,
        [3, 2],
        input_nodes="paper",
        batch_size=16,
        seed=1,
        num_workers=0,
        feature_dtype=torch.float16,
    )
    batch = next(iter(kept))
    assert batch["paper"].x.dtype == torch.float16
    assert batch["author"].x.dtype == torch.float16  # floating rows in the asked dtype


def test_a_bfloat16_table_stays_bfloat16_by_default():
    rows = torch.randn(4, 3).to(torch.bfloat16)
    assert as_batch_dtype(rows, None) is rows
    labels = torch.arange(4)
    assert as_batch_dtype(labels, torch.float16) is labels


@pytest.mark.parametrize("value", [torch.int64, "float16", np.float16, 16])
def test_a_feature_dtype_that_is_not_a_floating_torch_dtype_is_refused(single, value):
    with pytest.raises(TypeError, match=r"'feature_dtype' must be None .* \(got "):
        NeighborLoader(single, [2], batch_size=8, feature_dtype=value)


@pytest.mark.parametrize("feature_dtype", [None, torch.float16])
def test_link_batches_of_a_half_data_follow_feature_dtype(feature_dtype):
    data = id_graph(num_nodes=100, num_edges=600)
    data.x = data.x.half()
    loader = LinkNeighborLoader(
        data, [3, 2], batch_size=32, seed=2, num_workers=0, feature_dtype=feature_dtype
    )
    batch = next(iter(loader))
    assert batch.x.dtype == (feature_dtype or torch.float32)
    np.testing.assert_array_equal(batch.x[:, 0].numpy(), batch.n_id.numpy().astype(np.float16))
