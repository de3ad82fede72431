"""The Trainer and the CLI end to end: accuracy against published figures and an MLP."""

import json

import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.nn import MLP

from graphengine import NeighborLoader
from graphengine.cli import main
from graphengine.datasets import load_dataset
from graphengine.nn.models import build_model
from graphengine.train.labels import seed_labels
from graphengine.train.subgraph import SubgraphSampling
from graphengine.train.trainer import Trainer


class FeaturesOnly(torch.nn.Module):
    """An MLP called like a GNN: it ignores the edges."""

    def __init__(self, channels):
        super().__init__()
        self.mlp = MLP(channels, dropout=0.5)

    def forward(self, x, edge_index):
        return self.mlp(x)


def small_trainer(dataset, kind: str = "sage", **options) -> Trainer:
    """A Trainer of a seeded 2-layer ``kind`` model (hidden 32), fanouts 5,5, batches of 512."""
    torch.manual_seed(0)
    model = build_model(kind, dataset.num_features, 32, dataset.num_classes, 2)
    return Trainer(model, dataset, fanouts=[5, 5], batch_size=512, progress=False, **options)


def weights_of(trainer: Trainer) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in trainer.model.parameters()])


def test_gcn_on_cora_reaches_published_accuracy(shared_datasets):
    dataset = load_dataset("cora", root=shared_datasets / "planetoid")
    torch.manual_seed(0)
    model = build_model("gcn", dataset.num_features, 16, dataset.num_classes, 2, dropout=0.5)
    trainer = Trainer(
        model, dataset, fanouts=[-1, -1], batch_size=140, lr=0.01, weight_decay=5e-4, progress=False
    )
    trainer.fit(200, eval_every=200)
    # Kipf and Welling report 81.5%; the issue asks for at least 79%.
    assert trainer.evaluate("test") >= 0.79


def test_gnn_beats_mlp_on_synthetic_small(tmp_path):
    dataset = load_dataset("synthetic-small", root=tmp_path)
    accuracy = {}
    for name in ("sage", "mlp"):
        torch.manual_seed(0)
        if name == "mlp":
            model = FeaturesOnly([dataset.num_features, 128, dataset.num_classes])
        else:
            model = build_model("sage", dataset.num_features, 128, dataset.num_classes, 2)
        trainer = Trainer(model, dataset, fanouts=[10, 10], batch_size=256, progress=False)
        trainer.fit(5, eval_every=5)
        accuracy[name] = trainer.evaluate("test")
    assert accuracy["sage"] > accuracy["mlp"] + 0.15, accuracy


def test_bf16_steps_compute_in_bf16_and_learn_as_fp32_does(tmp_path):
    dataset = load_dataset("synthetic-small", root=tmp_path)
    accuracy, dtypes = {}, {}
    for precision in ("fp32", "bf16"):
        torch.manual_seed(0)
        model = build_model("sage", dataset.num_features, 64, dataset.num_classes, 2)
        trainer = Trainer(
            model, dataset, fanouts=[10, 10], batch_size=256, progress=False, precision=precision
        )
        seen = dtypes.setdefault(precision, set())
        trainer.batches.train_module.register_forward_hook(
            lambda m, i, out, s=seen: s.add(out.dtype)
        )
        trainer.fit(4, eval_every=4)
        accuracy[precision] = trainer.evaluate("test")
        assert all(p.dtype == torch.float32 for p in model.parameters())
    assert dtypes == {"fp32": {torch.float32}, "bf16": {torch.bfloat16}}
    assert accuracy["bf16"] > accuracy["fp32"] - 0.02, accuracy
    with pytest.raises(ValueError, match="'precision' must be one of"):
        Trainer(model, dataset, precision="fp16")


@pytest.mark.parametrize("kind", ["sage", "gat"])
def test_bf16_features_train_as_bf16_casts_in_the_first_layer_do(tmp_path, kind):
    """GraphSAGE's and GAT's first layers cast x to bfloat16 under autocast, so batches read
    from a bfloat16 copy of x train to the same weights; float32 batches without it."""
    dataset = load_dataset("synthetic-small", root=tmp_path)
    weights, batch_dtypes = {}, {}
    for bf16_features in (True, False):
        trainer = small_trainer(
            dataset, kind, precision="bf16", bf16_features=bf16_features, eval_mode="sampled"
        )
        batch_dtypes[bf16_features] = next(iter(trainer.train_loader)).x.dtype
        trainer.fit(1, eval_every=0)
        weights[bf16_features] = weights_of(trainer)
    assert batch_dtypes == {True: torch.bfloat16, False: torch.float32}
    torch.testing.assert_close(weights[True], weights[False], rtol=0, atol=0)


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_a_first_layer_reading_rows_from_the_store_trains_as_gathered_rows_do(tmp_path, precision):
    dataset = load_dataset("synthetic-small", root=tmp_path)
    weights, accuracies = {}, {}
    for from_store in (True, False):
        trainer = small_trainer(
            dataset, precision=precision, eval_mode="sampled", aggregate_from_store=from_store
        )
        batch = next(iter(trainer.train_loader))
        assert (batch.x is None) == from_store and batch.y is None
        accuracies[from_store] = trainer.fit(1)[-1]["val_acc"]
        weights[from_store] = weights_of(trainer)
    torch.testing.assert_close(weights[True], weights[False], rtol=0, atol=0)
    assert accuracies[True] == accuracies[False]


def test_steps_read_the_seeds_labels_from_the_dataset_when_batches_carry_none(tmp_path):
    """The Trainer's batches carry no ``y`` (the loss reads only the seeds'); a step on
    them is the step on the same batches with ``y`` gathered, bit for bit."""
    dataset = load_dataset("synthetic-small", root=tmp_path)
    bare, labelled = small_trainer(dataset), small_trainer(dataset)
    seeds = torch.as_tensor(dataset.train_idx)[:1024]
    options = {"input_nodes": seeds, "batch_size": 512, "seed": 5}
    batches = list(NeighborLoader((bare.batches.features.store, dataset.graph), [5, 5], **options))
    with_y = list(NeighborLoader(dataset, [5, 5], **options))
    assert all(b.y is None for b in batches) and all(b.y is not None for b in with_y)
    for trainer in (bare, labelled):
        trainer.model.train()
    for batch, reference in zip(batches, with_y, strict=True):
        torch.manual_seed(1)  # the same dropout masks
        stepped = bare.step(batch)
        torch.manual_seed(1)
        assert stepped == labelled.step(reference)
    torch.testing.assert_close(weights_of(bare), weights_of(labelled), rtol=0, atol=0)


def test_seed_labels_of_a_batch_without_y_need_a_table():
    batch = Data(n_id=torch.tensor([4, 0, 2]), batch_size=2, num_nodes=3)
    labels = torch.tensor([10, 11, 12, 13, 14], dtype=torch.int32)
    assert torch.equal(seed_labels(batch, labels), torch.tensor([14, 10]))
    batch.y = torch.tensor([1, 2, 3])
    assert torch.equal(seed_labels(batch, labels), torch.tensor([1, 2]))
    del batch.y
    with pytest.raises(ValueError, match=r"the batch has no 'y' and no label table was given"):
        seed_labels(batch, None)


def test_bf16_features_stay_float32_where_the_first_layer_reads_x_first(tmp_path):
    dataset = load_dataset("synthetic-small", root=tmp_path)
    model = build_model("gcn", dataset.num_features, 32, dataset.num_classes, 2)
    trainer = Trainer(model, dataset, fanouts=[5, 5], progress=False, precision="bf16")
    assert next(iter(trainer.train_loader)).x.dtype == torch.float32


def test_resume_from_checkpoint_continues_identically(tmp_path):
    dataset = load_dataset("synthetic-small", root=tmp_path / "data")

    def trainer(checkpoint):
        return small_trainer(dataset, checkpoint=checkpoint, eval_mode="full")

    straight = trainer(None)
    straight.fit(2)
    interrupted = trainer(tmp_path / "ckpt.pt")
    interrupted.fit(1)
    resumed = trainer(tmp_path / "ckpt.pt")
    assert resumed.epoch == 1
    resumed.fit(2)
    for a, b in zip(straight.model.parameters(), resumed.model.parameters(), strict=True):
        assert torch.allclose(a, b)


def test_cli_train_prints_json_metrics(tmp_path, capsys):
    metrics = tmp_path / "metrics.jsonl"
    code = main(
        [
            "train",
            "--dataset",
            "synthetic-small",
            "--root",
            str(tmp_path),
            "--model",
            "sage",
            "--fanouts",
            "5,5",
            "--batch-size",
            "512",
            "--epochs",
            "2",
            "--metrics",
            str(metrics),
        ]
    )
    assert code == 0
    lines = capsys.readouterr().out.strip().splitlines()
    result = json.loads(lines[-1])
    assert {"dataset", "train_acc", "val_acc", "test_acc", "epoch_s"} <= set(result)
    assert result["dataset"] == "synthetic-small" and result["epochs"] == 2
    assert [json.loads(line)["epoch"] for line in metrics.read_text().splitlines()] == [1, 2]


def test_cli_reports_bad_input(tmp_path, caplog):
    assert main(["train", "--dataset", "nope", "--root", str(tmp_path)]) == 2
    assert "unknown dataset 'nope'" in caplog.text
    with pytest.raises(SystemExit):
        main(["train", "--fanouts", "5,-3"])


def test_cli_datasets_lists_catalog(tmp_path, capsys):
    assert main(["datasets", "--root", str(tmp_path)]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert any(line.startswith("synthetic-products") for line in out)
    assert json.loads(out[-1])["root"] == str(tmp_path)


@pytest.mark.parametrize("sampler", ["neighbor", "cluster"])
def test_a_model_with_fewer_outputs_than_classes_is_refused_naming_both(tmp_path, sampler):
    """A user's model of 4 outputs on a dataset of 8 classes failed inside the loss as
    torch's "Target 4 is out of bounds"; now the first batch names the output and the
    classes, before any step changes a weight."""
    dataset = load_dataset("synthetic-small", root=tmp_path)
    torch.manual_seed(0)
    narrow = FeaturesOnly([dataset.num_features, 16, 4])
    before = torch.cat([p.detach().flatten().clone() for p in narrow.parameters()])
    if sampler == "cluster":
        sampler = SubgraphSampling("cluster", num_parts=8, clusters_per_batch=2)
    trainer = Trainer(narrow, dataset, fanouts=[5], batch_size=512, progress=False, sampler=sampler)
    with pytest.raises(
        ValueError, match=r"output has shape \[\d+, 4\], for a dataset of 8 classes"
    ):
        trainer.fit(1)
    assert torch.equal(torch.cat([p.detach().flatten() for p in narrow.parameters()]), before)
