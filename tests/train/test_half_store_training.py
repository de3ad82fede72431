"""Training on a float16 store is training on the float32 store of the same (rounded) values:
the loaders hand the model float32 rows, so the weights match bit for bit."""

import dataclasses

import numpy as np
import pytest
import torch

from graphengine.datasets import load_dataset
from graphengine.nn.models import build_model
from graphengine.train.trainer import Trainer


def trained_weights(dataset, **options) -> tuple[torch.Tensor, object]:
    torch.manual_seed(0)
    model = build_model("sage", dataset.num_features, 32, dataset.num_classes, 2)
    trainer = Trainer(model, dataset, fanouts=[5, 5], batch_size=512, progress=False, **options)
    batch = next(iter(trainer.train_loader))
    trainer.fit(1, eval_every=0)
    return torch.cat([p.detach().flatten() for p in model.parameters()]), batch


@pytest.mark.parametrize("aggregate_from_store", [False, True])
def test_a_half_store_trains_as_the_float32_store_of_its_values(tmp_path, aggregate_from_store):
    dataset = load_dataset("synthetic-small", root=tmp_path)
    half = dataclasses.replace(dataset, x=np.asarray(dataset.x).astype(np.float16))
    rounded = dataclasses.replace(dataset, x=half.x.astype(np.float32))
    options = {"eval_mode": "sampled", "aggregate_from_store": aggregate_from_store}
    half_weights, half_batch = trained_weights(half, **options)
    rounded_weights, _ = trained_weights(rounded, **options)
    # a half table is not handed to the fused first layer: the batch carries float32 rows
    assert half_batch.x is not None and half_batch.x.dtype == torch.float32
    torch.testing.assert_close(half_weights, rounded_weights, rtol=0, atol=0)
