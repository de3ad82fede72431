"""Node classification with the Trainer's other samplers: LABOR, Cluster-GCN and GraphSAINT
batches; the subgraph loss against a direct computation, accuracy against neighbor sampling."""

import pytest
import torch
import torch.nn.functional as F
from torch_geometric.data import Data

from graphengine.datasets import load_dataset
from graphengine.loader import ClusterLoader, GraphSAINTRandomWalkSampler, LaborLoader
from graphengine.nn.models import build_model
from graphengine.train import Trainer
from graphengine.train.subgraph import SubgraphLogits, SubgraphSampling, subgraph_loss


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return load_dataset("synthetic-small", root=tmp_path_factory.mktemp("data"))


def test_subgraph_loss_is_the_node_norm_weighted_mean_over_training_nodes():
    torch.manual_seed(0)
    logits = torch.randn(6, 3)
    batch = Data(
        y=torch.tensor([0, 1, 2, 0, 1, 2]),
        train_mask=torch.tensor([True, False, True, True, False, True]),
        node_norm=torch.tensor([0.5, 9.0, 1.0, 2.0, 9.0, 0.25]),
    )
    loss, target = subgraph_loss(logits[batch.train_mask], batch)
    assert torch.equal(target, torch.tensor([0, 2, 0, 2]))
    per_node = [F.cross_entropy(logits[i : i + 1], batch.y[i : i + 1]) for i in (0, 2, 3, 5)]
    weights = [0.5, 1.0, 2.0, 0.25]
    expected = sum(w * p for w, p in zip(weights, per_node, strict=True)) / sum(weights)
    assert loss.item() == pytest.approx(expected.item(), rel=1e-6)
    del batch.node_norm
    loss, _ = subgraph_loss(logits[batch.train_mask], batch)
    assert loss.item() == pytest.approx(torch.stack(per_node).mean().item(), rel=1e-6)


def test_subgraph_logits_are_the_training_nodes_rows():
    model = torch.nn.Linear(4, 2)
    batch = Data(
        x=torch.randn(5, 4),
        edge_index=torch.zeros(2, 0, dtype=torch.long),
        train_mask=torch.tensor([False, True, True, False, True]),
    )

    class OnX(torch.nn.Module):
        def forward(self, x, edge_index):
            return model(x)

    out = SubgraphLogits(OnX())(batch)
    assert torch.equal(out, model(batch.x)[batch.train_mask])


def _accuracy(dataset, sampler) -> float:
    torch.manual_seed(0)
    model = build_model("sage", dataset.num_features, 64, dataset.num_classes, num_layers=2)
    trainer = Trainer(
        model,
        dataset,
        fanouts=[10, 5],
        batch_size=512,
        lr=0.003,
        eval_mode="full",
        num_workers=0,
        progress=False,
        sampler=sampler,
    )
    trainer.fit(10, eval_every=0)
    return trainer.evaluate("test"), trainer


def test_labor_cluster_and_saint_match_neighbor_sampling_accuracy(dataset, tmp_path):
    neighbor, _ = _accuracy(dataset, "neighbor")
    assert neighbor > 0.9
    samplers = {
        "labor": "labor",
        "cluster": SubgraphSampling(
            "cluster", num_parts=40, clusters_per_batch=5, cluster_dir=tmp_path
        ),
        "saint": SubgraphSampling("saint", roots=512, walk_length=2),
    }
    kinds = {"labor": LaborLoader, "cluster": ClusterLoader, "saint": GraphSAINTRandomWalkSampler}
    for name, sampler in samplers.items():
        accuracy, trainer = _accuracy(dataset, sampler)
        assert isinstance(trainer.train_loader, kinds[name])
        assert trainer.sampler == name
        assert accuracy >= neighbor - 0.02, (name, accuracy, neighbor)
    # the clusters were cached, under a digest of the graph and the arguments
    assert len(list((tmp_path / "part_40").glob("*/metis.npz"))) == 1


def test_trainer_refuses_unknown_samplers(dataset):
    model = build_model("sage", dataset.num_features, 8, dataset.num_classes, num_layers=2)
    with pytest.raises(ValueError, match="'sampler' must be one of"):
        Trainer(model, dataset, fanouts=[5, 5], sampler="random", progress=False)
    with pytest.raises(ValueError, match="'kind' must be one of"):
        SubgraphSampling("walk")
