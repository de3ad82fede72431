"""The heterogeneous synthetic dataset (papers, authors, institutions), and training a
``to_hetero`` GraphSAGE on it with the Trainer and the CLI."""

import dataclasses
import json
import logging

import numpy as np
import pytest
import torch
from torch_geometric.data import HeteroData

from graphengine.cli import main
from graphengine.datasets import (
    HeteroGraphDataset,
    generate_hetero,
    is_heterogeneous,
    load_dataset,
    load_hetero_dataset,
)
from graphengine.datasets.catalog import HETERO
from graphengine.datasets.hetero import (
    AFFILIATED,
    CITES,
    EDGE_TYPES,
    NODE_TYPES,
    REV_AFFILIATED,
    REV_WRITES,
    WRITES,
)
from graphengine.nn.models import build_model
from graphengine.parallel.base import SingleProcess
from graphengine.train.trainer import Trainer

TINY = "synthetic-hetero-s"
SPEC = HETERO[TINY]


@pytest.fixture(scope="module")
def tiny() -> HeteroGraphDataset:
    return generate_hetero(TINY, SPEC)


def arrays(dataset: HeteroGraphDataset) -> dict:
    return dataset._arrays()


def test_generator_is_deterministic_by_seed(tiny):
    again = generate_hetero(TINY, SPEC)
    other = generate_hetero(TINY, dataclasses.replace(SPEC, seed=1))
    assert arrays(tiny).keys() == arrays(again).keys() == arrays(other).keys()
    for key, value in arrays(tiny).items():
        assert np.array_equal(value, arrays(again)[key]), key
    for key in ("x.paper", "x.author", "x.institution", "y", "train_idx"):
        assert not np.array_equal(arrays(tiny)[key], arrays(other)[key]), key
    for edge_type in EDGE_TYPES:
        a, b = tiny.edge_index[edge_type], other.edge_index[edge_type]
        assert a.shape != b.shape or not np.array_equal(a, b), edge_type


def test_shapes_dtypes_ids_and_splits(tiny):
    assert tiny.node_types == list(NODE_TYPES)
    assert tiny.edge_types == list(EDGE_TYPES)
    assert tiny.num_nodes == {"paper": 2000, "author": 1200, "institution": 100}
    assert tiny.num_features == {"paper": 16, "author": 8, "institution": 4}
    for node_type, x in tiny.x.items():
        assert x.dtype == np.float32 and x.shape == (tiny.num_nodes[node_type], x.shape[1])
        assert np.isfinite(x).all()
    for (src, _, dst), edges in tiny.edge_index.items():
        assert edges.dtype == np.int64 and edges.ndim == 2 and edges.shape[0] == 2
        assert edges.shape[1] > 0
        assert edges[0].min() >= 0 and edges[0].max() < tiny.num_nodes[src]
        assert edges[1].min() >= 0 and edges[1].max() < tiny.num_nodes[dst]
        keys = edges[0] * tiny.num_nodes[dst] + edges[1]
        assert len(np.unique(keys)) == len(keys)  # no repeated edges
    assert np.array_equal(tiny.edge_index[REV_WRITES], tiny.edge_index[WRITES][::-1])
    assert np.array_equal(tiny.edge_index[REV_AFFILIATED], tiny.edge_index[AFFILIATED][::-1])
    cites = tiny.edge_index[CITES]
    assert not np.any(cites[0] == cites[1])
    forward, backward = cites[0] * 2000 + cites[1], cites[1] * 2000 + cites[0]
    assert np.array_equal(np.sort(forward), np.sort(backward))  # stored both ways
    # Every paper has an author, every author an institution.
    assert np.bincount(tiny.edge_index[WRITES][1], minlength=2000).min() >= 1
    assert np.bincount(tiny.edge_index[AFFILIATED][0], minlength=1200).min() >= 1

    assert tiny.y.dtype == np.int64 and tiny.y.shape == (2000,)
    assert set(np.unique(tiny.y)) == set(range(SPEC.num_classes))
    splits = [tiny.train_idx, tiny.val_idx, tiny.test_idx]
    assert [len(s) for s in splits] == [SPEC.num_train, SPEC.num_val, 2000 - 1200]
    assert all(s.dtype == np.int64 and np.all(np.diff(s) > 0) for s in splits)
    assert np.array_equal(np.sort(np.concatenate(splits)), np.arange(2000))  # disjoint, all


def test_structure_is_correlated_with_the_paper_class(tiny):
    y = tiny.y
    chance = float(np.sum((np.bincount(y) / len(y)) ** 2))  # same class at random
    cites = tiny.edge_index[CITES]
    assert (y[cites[0]] == y[cites[1]]).mean() > chance + 0.3
    # Two papers that share an author share the class more often than two at random.
    writes = tiny.edge_index[WRITES]
    order = np.argsort(writes[0], kind="stable")
    authors, papers = writes[0][order], writes[1][order]
    same_author = authors[1:] == authors[:-1]
    assert (y[papers[1:]] == y[papers[:-1]])[same_author].mean() > chance + 0.2


def test_catalog_caches_hetero_datasets_and_keeps_them_apart(tmp_path, tiny):
    assert is_heterogeneous(TINY) and is_heterogeneous("synthetic-hetero")
    assert not is_heterogeneous("synthetic-small") and not is_heterogeneous("nope")
    dataset = load_hetero_dataset(TINY, root=tmp_path)
    assert (tmp_path / TINY / "dataset.json").is_file()
    assert isinstance(dataset.x["paper"], np.memmap)
    again = load_hetero_dataset(TINY, root=tmp_path, mmap=False)
    for key, value in arrays(tiny).items():
        assert np.array_equal(arrays(again)[key], value), key
    data = again.to_hetero_data()
    assert isinstance(data, HeteroData)
    assert data.metadata() == (list(NODE_TYPES), list(EDGE_TYPES))
    assert data["paper"].x.dtype == torch.float32 and data["paper"].y.dtype == torch.int64
    assert int(data["paper"].train_mask.sum()) == SPEC.num_train
    assert not (data["paper"].train_mask & data["paper"].test_mask).any()
    with pytest.raises(ValueError, match=r"heterogeneous dataset .*load_hetero_dataset"):
        load_dataset(TINY, root=tmp_path)
    with pytest.raises(ValueError, match=r"'synthetic-small' is not a heterogeneous dataset"):
        load_hetero_dataset("synthetic-small", root=tmp_path)


def test_dataset_checks_ids_and_shapes(tiny):
    fields = {f.name: getattr(tiny, f.name) for f in dataclasses.fields(tiny)}
    bad_edges = dict(tiny.edge_index)
    bad_edges[WRITES] = np.array([[1200], [0]])  # author 1200 of 1200
    with pytest.raises(ValueError, match=r"holds node id 1200, outside \[0, 1200\)"):
        HeteroGraphDataset(**{**fields, "edge_index": bad_edges})
    with pytest.raises(ValueError, match=r"'x' of 'author' must have shape \[1200"):
        HeteroGraphDataset(**{**fields, "x": {**tiny.x, "author": tiny.x["author"][:5]}})
    with pytest.raises(ValueError, match=r"'x' of 'author' of dataset .* must be one of float32"):
        HeteroGraphDataset(**{**fields, "x": {**tiny.x, "author": tiny.x["author"].astype(int)}})
    with pytest.raises(ValueError, match="'test' holds node id 2000"):
        HeteroGraphDataset(**{**fields, "test_idx": np.array([2000])})


class PaperFeaturesOnly(torch.nn.Module):
    """An MLP on the papers' own features, called like a heterogeneous GNN."""

    def __init__(self, in_channels: int, num_classes: int):
        super().__init__()
        self.mlp = torch.nn.Sequential(
            torch.nn.Linear(in_channels, 32),
            torch.nn.ReLU(),
            torch.nn.Dropout(0.5),
            torch.nn.Linear(32, num_classes),
        )

    def forward(self, x_dict, edge_index_dict):
        return {"paper": self.mlp(x_dict["paper"])}


def hetero_sage(dataset: HeteroGraphDataset, hidden: int = 32, layers: int = 2):
    return build_model(
        "sage",
        dataset.num_features,
        hidden,
        dataset.num_classes,
        layers,
        metadata=dataset.metadata(),
    )


def test_to_hetero_sage_learns_from_the_neighbors(tiny):
    majority = np.bincount(tiny.y[tiny.test_idx]).max() / len(tiny.test_idx)
    accuracy, losses = {}, {}
    for name in ("sage", "features"):
        torch.manual_seed(0)
        if name == "sage":
            model = hetero_sage(tiny)
        else:
            model = PaperFeaturesOnly(tiny.num_features["paper"], tiny.num_classes)
        trainer = Trainer(model, tiny, fanouts=[5, 5], batch_size=100, progress=False)
        assert trainer.eval_mode == "sampled" and trainer.forward_mode == "whole"
        history = trainer.fit(5, eval_every=5)
        losses[name] = [m["loss"] for m in history]
        accuracy[name] = trainer.evaluate("test")
        assert history[-1]["val_acc"] == trainer.evaluate("val")  # sampled: repeatable
    assert losses["sage"][-1] < 0.6 * losses["sage"][0], losses
    assert accuracy["sage"] > majority + 0.25, (accuracy, majority)
    assert accuracy["sage"] > accuracy["features"] + 0.1, accuracy


def test_hetero_resume_from_checkpoint_continues_identically(tmp_path, tiny):
    def trainer(checkpoint):
        torch.manual_seed(0)
        return Trainer(
            hetero_sage(tiny, hidden=16),
            tiny,
            fanouts=[4, 4],
            batch_size=400,
            progress=False,
            checkpoint=checkpoint,
        )

    straight = trainer(None)
    straight.fit(2, eval_every=0)
    trainer(tmp_path / "ckpt.pt").fit(1, eval_every=0)
    resumed = trainer(tmp_path / "ckpt.pt")
    assert resumed.epoch == 1
    resumed.fit(2, eval_every=0)
    for (name, a), b in zip(
        straight.model.named_parameters(), resumed.model.parameters(), strict=True
    ):
        assert torch.equal(a, b), name
    # A checkpoint of another dataset is refused, naming what differs.
    other = generate_hetero(TINY, dataclasses.replace(SPEC, paper_features=12))
    with pytest.raises(ValueError, match="num_features"):
        torch.manual_seed(0)
        Trainer(
            hetero_sage(other, 16), other, [4, 4], checkpoint=tmp_path / "ckpt.pt", progress=False
        )


class TwoWorkers(SingleProcess):
    world_size = 2


@pytest.mark.parametrize(
    "options, message",
    [
        ({"eval_mode": "full"}, r"'eval_mode' 'full' is not available for a heterogeneous .*"),
        ({"eval_mode": "layerwise"}, r"'layerwise' is not available for a heterogeneous"),
        ({"forward": "blocks"}, r"'forward' 'blocks' is not available for a heterogeneous"),
        ({"strategy": TwoWorkers()}, r"single process .*TwoWorkers with 2 workers"),
        ({"remote_cache": "5%"}, r"'remote_cache' needs a partitioned graph"),
    ],
)
def test_trainer_refuses_what_hetero_training_does_not_do(tiny, options, message):
    with pytest.raises(ValueError, match=message):
        Trainer(hetero_sage(tiny), tiny, fanouts=[2, 2], progress=False, **options)


def test_models_that_cannot_be_hetero_are_refused(tiny):
    for name in ("gcn", "gin", "gat"):
        with pytest.raises(ValueError, match=rf"'model' '{name}' cannot be made heterogeneous"):
            build_model(name, tiny.num_features, 8, 4, 2, metadata=tiny.metadata())
    with pytest.raises(ValueError, match="feature columns of every node type"):
        build_model("sage", {"paper": 16}, 8, 4, 2, metadata=tiny.metadata())
    with pytest.raises(ValueError, match="pass the data's 'metadata'"):
        build_model("sage", tiny.num_features, 8, 4, 2)
    from torch_geometric.nn import GraphSAGE, to_hetero

    lazy = to_hetero(GraphSAGE((-1, -1), 8, 2, 4), tiny.metadata())
    with pytest.raises(ValueError, match="uninitialized lazy parameters"):
        Trainer(lazy, tiny, fanouts=[2, 2], progress=False)


def test_cli_trains_the_tiny_preset_end_to_end(tmp_path, capsys, caplog):
    caplog.set_level(logging.INFO)
    metrics = tmp_path / "metrics.jsonl"
    argv = ["train", "--dataset", TINY, "--root", str(tmp_path), "--fanouts", "4,4"]
    argv += ["--batch-size", "400", "--epochs", "2", "--hidden", "16", "--no-progress"]
    assert main([*argv, "--metrics", str(metrics)]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    epochs, result = lines[:-1], lines[-1]
    assert [m["epoch"] for m in epochs] == [1, 2]
    assert all({"loss", "train_acc", "val_acc", "epoch_s", "stage_s"} <= set(m) for m in epochs)
    assert epochs[0]["traffic"]["feature_bytes"] > 0
    assert result["dataset"] == TINY and result["model"] == "sage" and result["epochs"] == 2
    assert {"train_acc", "val_acc", "test_acc", "first_epoch_s", "epoch_s"} <= set(result)
    assert 0.0 <= result["test_acc"] <= 1.0
    assert [json.loads(line)["epoch"] for line in metrics.read_text().splitlines()] == [1, 2]
    assert "HeteroGraphDataset('synthetic-hetero-s'" in caplog.text
    assert (tmp_path / TINY / "dataset.json").is_file()


@pytest.mark.parametrize(
    "options, message",
    [
        (["--model", "gcn"], "'model' 'gcn' cannot be made heterogeneous"),
        (["--eval", "full"], "--eval full is not available for heterogeneous datasets"),
        (["--eval", "layerwise"], "--eval layerwise is not available for heterogeneous"),
        (["--nproc", "2"], "--nproc 2: heterogeneous datasets (synthetic-hetero-s) train in"),
        (["--parallel", "hybrid"], "--parallel hybrid is not available for heterogeneous"),
        (["--features", "8"], "synthetic-hetero-s is heterogeneous and keeps its own features"),
    ],
)
def test_cli_refuses_bad_hetero_options_before_generating(tmp_path, caplog, options, message):
    assert main(["train", "--dataset", TINY, "--root", str(tmp_path), *options]) == 2
    assert message in caplog.text
    assert list(tmp_path.iterdir()) == []


def test_cli_lists_hetero_datasets_and_other_commands_refuse_them(tmp_path, capsys, caplog):
    assert main(["datasets", "--root", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line.split()[1:3] for line in out[2:-1]}
    assert rows["synthetic-hetero"] == rows[TINY] == ["synthetic-hetero", "no"]
    argv = ["partition", "--dataset", TINY, "--root", str(tmp_path), "--parts", "2"]
    assert main([*argv, "--out", str(tmp_path / "parts")]) == 2
    assert "'synthetic-hetero-s' is a heterogeneous dataset" in caplog.text
