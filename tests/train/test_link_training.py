"""Link prediction: the edge split against PyG's RandomLinkSplit, the metrics against brute
force, the decoders, and the Trainer and CLI on real Cora (test AUC >= 0.90)."""

import json

import numpy as np
import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.transforms import RandomLinkSplit

from graphengine.cli import main
from graphengine.nn.decoders import DotProductDecoder, MLPDecoder, build_decoder
from graphengine.nn.models import build_model
from graphengine.train.link import LinkTrainer
from graphengine.train.link_metrics import ranking_metrics, roc_auc
from graphengine.train.link_split import random_link_split
from samplers.link import draw_negative_destinations


def _graph(num_nodes=60, num_edges=300, undirected=True, seed=0) -> Data:
    rng = np.random.default_rng(seed)
    src = rng.integers(0, num_nodes, num_edges)
    dst = rng.integers(0, num_nodes, num_edges)
    keep = src != dst
    pairs = np.unique(np.stack([src[keep], dst[keep]]), axis=1)
    if undirected:
        pairs = np.unique(np.concatenate([pairs, pairs[::-1]], axis=1), axis=1)
    edge_index = torch.from_numpy(pairs)
    return Data(
        x=torch.randn(num_nodes, 4),
        edge_index=edge_index,
        edge_weight=torch.rand(edge_index.size(1)),
        num_nodes=num_nodes,
    )


def _pairs(edge_index: torch.Tensor) -> set:
    return set(map(tuple, edge_index.t().tolist()))


@pytest.mark.parametrize(
    "undirected,disjoint,add_train_negatives",
    [(True, 0.0, True), (False, 0.0, True), (True, 0.3, False), (False, 5, True)],
)
def test_split_positives_equal_pygs_random_link_split(undirected, disjoint, add_train_negatives):
    data = _graph(undirected=undirected)
    ours = random_link_split(
        data,
        num_val=0.1,
        num_test=0.2,
        is_undirected=undirected,
        disjoint_train_ratio=disjoint,
        add_negative_train_samples=add_train_negatives,
        seed=7,
    )
    torch.manual_seed(7)
    theirs = RandomLinkSplit(
        num_val=0.1,
        num_test=0.2,
        is_undirected=undirected,
        disjoint_train_ratio=disjoint,
        add_negative_train_samples=add_train_negatives,
    )(data)
    for mine, pyg in zip((ours.train, ours.val, ours.test), theirs, strict=True):
        assert torch.equal(mine.edge_index, pyg.edge_index)
        assert torch.equal(mine.edge_weight, pyg.edge_weight)
        positives = int(pyg.edge_label.sum())
        assert torch.equal(
            mine.edge_label_index[:, :positives], pyg.edge_label_index[:, :positives]
        )
        assert mine.edge_label.shape == pyg.edge_label.shape
        assert mine.edge_label.dtype == torch.float32
        assert torch.equal(mine.edge_label, pyg.edge_label)
    assert torch.equal(data.edge_index, _graph(undirected=undirected).edge_index)  # untouched


def test_split_negatives_are_distinct_non_edges_and_uniform():
    data = _graph(num_nodes=12, num_edges=30)
    edges = _pairs(data.edge_index)
    counts = {}
    non_edges = [(i, j) for i in range(12) for j in range(12) if i != j and (i, j) not in edges]
    for seed in range(300):
        split = random_link_split(data, num_val=0.2, num_test=0.2, is_undirected=True, seed=seed)
        negatives = []
        for part in (split.train, split.val, split.test):
            negative = part.edge_label_index[:, part.edge_label == 0]
            negatives += list(map(tuple, negative.t().tolist()))
        assert len(set(negatives)) == len(negatives)
        assert not set(negatives) & edges
        assert all(i != j for i, j in negatives)
        for pair in negatives:
            counts[pair] = counts.get(pair, 0) + 1
    observed = np.array([counts.get(pair, 0) for pair in non_edges])
    expected = observed.sum() / len(non_edges)
    chi2 = ((observed - expected) ** 2 / expected).sum()
    dof = len(non_edges) - 1
    assert chi2 < dof + 5 * np.sqrt(2 * dof)


def test_split_warns_when_too_few_non_edges():
    full = torch.tensor([(i, j) for i in range(5) for j in range(5) if i != j]).t()
    data = Data(x=torch.zeros(5, 1), edge_index=full[:, :-2], num_nodes=5)
    with pytest.warns(UserWarning, match="fewer than"):
        split = random_link_split(data, num_val=2, num_test=2, seed=0)
    negatives = torch.cat(
        [s.edge_label_index[:, s.edge_label == 0] for s in split.__dict__.values()], 1
    )
    assert _pairs(negatives) == _pairs(full[:, -2:])


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"num_val": 1.5}, "num_val"),
        ({"num_test": -1}, "num_test"),
        ({"num_val": 0.5, "num_test": 0.5}, "none for training"),
        ({"disjoint_train_ratio": 10_000}, "disjoint_train_ratio"),
        ({"neg_sampling_ratio": -1.0}, "neg_sampling_ratio"),
    ],
)
def test_split_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        random_link_split(_graph(), **kwargs)


def test_split_rejects_bad_edges():
    with pytest.raises(ValueError, match="outside"):
        random_link_split(Data(edge_index=torch.tensor([[0, 5], [1, 0]]), num_nodes=3))
    with pytest.raises(ValueError, match="shape"):
        random_link_split(Data(edge_index=torch.tensor([0, 1, 2]), num_nodes=3))
    with pytest.raises(TypeError, match="Data"):
        random_link_split(torch.tensor([[0], [1]]))


def test_roc_auc_equals_pairwise_count():
    rng = np.random.default_rng(0)
    scores = torch.from_numpy(rng.integers(0, 6, 200).astype(np.float64))  # many ties
    labels = torch.from_numpy(rng.integers(0, 2, 200))
    pos, neg = scores[labels == 1], scores[labels == 0]
    wins = (pos[:, None] > neg[None, :]).double() + 0.5 * (pos[:, None] == neg[None, :]).double()
    assert roc_auc(scores, labels) == pytest.approx(float(wins.mean()), abs=1e-12)
    assert roc_auc(torch.tensor([0.1, 0.9]), torch.tensor([0, 1])) == 1.0


def test_roc_auc_rejects_one_class_and_bad_labels():
    with pytest.raises(ValueError, match="positives and negatives"):
        roc_auc(torch.rand(4), torch.ones(4))
    with pytest.raises(ValueError, match=r"0 \(negative\) or 1"):
        roc_auc(torch.rand(3), torch.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match="same shape"):
        roc_auc(torch.rand(3), torch.tensor([0, 1]))


def test_ranking_metrics_equal_a_loop():
    rng = np.random.default_rng(1)
    positive = torch.from_numpy(rng.integers(0, 8, 50).astype(np.float64))
    negative = torch.from_numpy(rng.integers(0, 8, (50, 20)).astype(np.float64))
    ranks = []
    for p, row in zip(positive.tolist(), negative.tolist(), strict=True):
        ranks.append(1 + sum(n > p for n in row) + 0.5 * sum(n == p for n in row))
    ranks = np.array(ranks)
    result = ranking_metrics(positive, negative, ks=(1, 3, 10))
    assert result["mrr"] == pytest.approx(np.mean(1 / ranks))
    for k in (1, 3, 10):
        assert result[f"hits@{k}"] == pytest.approx(np.mean(ranks <= k))
    with pytest.raises(ValueError, match="num_pos=50"):
        ranking_metrics(positive, negative[:10])


def test_decoders():
    z_src, z_dst = torch.randn(7, 5), torch.randn(7, 5)
    assert torch.allclose(DotProductDecoder()(z_src, z_dst), (z_src * z_dst).sum(-1))
    mlp = MLPDecoder(5)
    assert mlp(z_src, z_dst).shape == (7,)
    assert torch.allclose(mlp(z_src, z_dst), mlp(z_dst, z_src))
    assert isinstance(build_decoder("mlp", 5), MLPDecoder)
    with pytest.raises(ValueError, match="'decoder' must be one of"):
        build_decoder("cosine", 5)


def test_cli_link_prediction_on_cora_reaches_auc_090(shared_datasets, capsys):
    code = main(
        [
            "train",
            "--task",
            "link",
            "--dataset",
            "cora",
            "--root",
            str(shared_datasets / "planetoid"),
            "--model",
            "gcn",
            "--fanouts",
            "-1,-1",
            "--hidden",
            "64",
            "--dropout",
            "0",
            "--lr",
            "0.01",
            "--batch-size",
            "512",
            "--epochs",
            "60",
            "--eval-every",
            "30",
            "--normalize-features",
            "--no-progress",
        ]
    )
    assert code == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["task"] == "link" and result["epochs"] == 60
    assert result["test_auc"] >= 0.90, result
    assert result["val_auc"] >= 0.88, result
    assert 0 < result["test_mrr"] <= 1
    assert result["test_hits@1"] <= result["test_hits@3"] <= result["test_hits@10"]


@pytest.mark.parametrize(
    "options,message",
    [
        (["--decoder", "mlp"], "--decoder is an option of --task link"),
        (["--task", "link", "--sampler", "cluster"], "node classification"),
        (["--task", "link", "--eval", "sampled"], "--eval full"),
        (["--task", "link", "--nproc", "2"], "one process"),
        (["--sampler", "saint", "--nproc", "2"], "one process"),
        (["--sampler", "saint", "--num-parts", "4"], "--sampler cluster"),
        (["--clusters-per-batch", "4"], "--clusters-per-batch is an option of --sampler cluster"),
        (["--sampler", "cluster", "--walk-length", "3"], "--walk-length is an option of"),
        (["--task", "link", "--dataset", "synthetic-hetero-s"], "homogeneous datasets"),
        (["--sampler", "cluster", "--dataset", "synthetic-hetero-s"], "heterogeneous"),
        (["--normalize-features", "--dataset", "synthetic-hetero-s"], "heterogeneous"),
        (["--normalize-features", "--partitions", "nowhere"], "a partition keeps its own"),
    ],
)
def test_cli_refuses_options_the_task_does_not_take(options, message, caplog):
    assert main(["train", "--epochs", "1", *options]) == 2
    assert message in caplog.text


def test_link_trainer_on_a_synthetic_graph_and_its_ranking_negatives():
    torch.manual_seed(0)
    data = _graph(num_nodes=200, num_edges=1200)
    data.x = torch.randn(200, 8)
    encoder = build_model("sage", 8, 16, 16, num_layers=2, dropout=0.0)
    trainer = LinkTrainer(
        encoder,
        build_decoder("mlp", 16),
        data,
        fanouts=[5, 5],
        batch_size=128,
        eval_mode="layerwise",
        num_workers=0,
        progress=False,
        eval_negatives=7,
        hits_at=(1, 8),
    )
    history = trainer.fit(2, eval_every=1)
    assert [m["epoch"] for m in history] == [1, 2] and "val_auc" in history[-1]
    metrics = trainer.evaluate_all()
    assert 0 <= metrics["test_auc"] <= 1 and metrics["test_hits@8"] == 1.0  # 7 negatives: rank <= 8
    # The ranking negatives of every source are neither its edges nor itself.
    edges = _pairs(data.edge_index)
    sources = np.arange(200)
    negatives = draw_negative_destinations(
        np.repeat(sources, 20), 200, seed=3, edges=trainer._not_negative
    ).reshape(200, 20)
    for source, row in zip(sources.tolist(), negatives.tolist(), strict=True):
        assert all((source, d) not in edges and d != source for d in row)


def test_link_trainer_refuses_splits_it_cannot_score():
    data = _graph()
    encoder = build_model("sage", 4, 8, 8, num_layers=1)
    with pytest.raises(ValueError, match="the val split has 0 positive"):
        LinkTrainer(encoder, DotProductDecoder(), data, num_val=0, progress=False)
    with pytest.raises(ValueError, match="'eval_negatives' must be >= 1"):
        LinkTrainer(encoder, DotProductDecoder(), data, eval_negatives=0, progress=False)


def test_split_takes_numpy_counts():
    data = _graph()
    ours = random_link_split(data, num_val=np.int64(5), num_test=np.int32(7), seed=1)
    assert int(ours.val.edge_label.sum()) == 5 and int(ours.test.edge_label.sum()) == 7
