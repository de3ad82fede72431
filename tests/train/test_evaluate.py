"""Evaluation modes: full-graph, layer-wise and sampled (all neighbors) agree; 'auto' picks."""

import numpy as np
import pytest
import torch
from torch_geometric.nn import GCN, GraphSAGE

from graphengine.datasets import SyntheticSpec, generate
from graphengine.nn import SeedLogits
from graphengine.train import evaluate
from graphengine.train.evaluate import Evaluator, resolve_eval_mode

SPEC = SyntheticSpec(
    num_nodes=1500, num_edges=20000, num_features=12, num_classes=4, num_train=300, num_val=300
)


@pytest.fixture(scope="module")
def dataset():
    return generate("eval-test", SPEC)


def evaluator(dataset, model, mode):
    return Evaluator(SeedLogits(model, 2), dataset, mode, [-1, -1], batch_size=128, seed=1)


def brute_force_accuracies(dataset, model):
    """The model on the whole graph at once, by hand."""
    model.eval()
    with torch.no_grad():
        logits = model(torch.from_numpy(dataset.x), dataset.graph.to_edge_index())
    prediction = logits.argmax(dim=-1).numpy()
    return {
        f"{split}_acc": float((prediction[idx] == dataset.y[idx]).mean())
        for split, idx in (
            ("train", dataset.train_idx),
            ("val", dataset.val_idx),
            ("test", dataset.test_idx),
        )
    }


@pytest.mark.parametrize("mode", ["full", "layerwise", "sampled"])
def test_every_mode_gives_the_exact_accuracies(dataset, mode):
    torch.manual_seed(0)
    model = GraphSAGE(SPEC.num_features, 16, 2, SPEC.num_classes)
    expected = brute_force_accuracies(dataset, model)
    got = evaluator(dataset, model, mode).accuracies()
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        # A node whose top two logits tie within float error may flip: allow one node.
        assert got[key] == pytest.approx(value, abs=1.0 / 300 + 1e-9), key
    assert 0.0 < expected["test_acc"] < 1.0  # an untrained model: neither trivial case


def test_accuracy_of_one_split_equals_its_entry(dataset):
    torch.manual_seed(1)
    model = GraphSAGE(SPEC.num_features, 16, 2, SPEC.num_classes)
    full = evaluator(dataset, model, "full")
    assert full.accuracy("val") == full.accuracies()["val_acc"]


def test_auto_picks_by_size_and_model(dataset, monkeypatch):
    sage = GraphSAGE(SPEC.num_features, 16, 2, SPEC.num_classes)
    gcn = GCN(SPEC.num_features, 16, 2, SPEC.num_classes)
    assert resolve_eval_mode("auto", dataset, sage) == "full"
    monkeypatch.setattr(evaluate, "FULL_EVAL_MAX_EDGES", dataset.graph.num_edges - 1)
    assert resolve_eval_mode("auto", dataset, sage) == "layerwise"
    assert resolve_eval_mode("auto", dataset, gcn) == "sampled"  # degree normalization
    assert resolve_eval_mode("sampled", dataset, gcn) == "sampled"


def test_bad_modes_are_refused(dataset):
    gcn = GCN(SPEC.num_features, 16, 2, SPEC.num_classes)
    with pytest.raises(ValueError, match=r"'eval_mode' must be one of .* \(got 'exact'\)"):
        resolve_eval_mode("exact", dataset, gcn)
    with pytest.raises(ValueError, match="'eval_mode' 'layerwise' needs a PyG BasicGNN"):
        resolve_eval_mode("layerwise", dataset, gcn)


def test_sampled_evaluation_of_an_empty_split_is_zero(dataset):
    torch.manual_seed(0)
    model = GraphSAGE(SPEC.num_features, 16, 2, SPEC.num_classes)
    empty = generate("eval-test", SPEC)
    empty.val_idx = np.empty(0, dtype=np.int64)
    assert evaluator(empty, model, "sampled").accuracy("val") == 0.0
