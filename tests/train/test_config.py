"""TrainConfig's checks, and the registry of training batches the Trainer builds a run from."""

import dataclasses

import pytest
import torch

from graphengine.datasets import load_dataset
from graphengine.loader import NeighborLoader
from graphengine.nn.forward import SeedLogits
from graphengine.nn.models import build_model
from graphengine.train import batches
from graphengine.train.batches.base import SeedBatches
from graphengine.train.batches.neighbor import NeighborBatches
from graphengine.train.batches.subgraph import SubgraphBatches
from graphengine.train.config import TrainConfig
from graphengine.train.trainer import Trainer


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return load_dataset("synthetic-small", root=tmp_path_factory.mktemp("data"))


def model_for(dataset) -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model("sage", dataset.num_features, 16, dataset.num_classes, 2)


@pytest.mark.parametrize(
    "field, value, error, message",
    [
        ("precision", "fp16", ValueError, r"'precision' must be one of \('fp32', 'bf16'\)"),
        ("parallel", "model", ValueError, r"'parallel' must be one of .* \(got 'model'\)"),
        ("eval_mode", "never", ValueError, r"'eval_mode' must be one of"),
        ("forward", "fast", ValueError, r"'forward' must be one of"),
        ("sampler", "random", ValueError, r"'sampler' must be one of"),
        ("sampler", 3, TypeError, r"'sampler' must be one of .* or a SubgraphSampling"),
        ("num_workers", -1, ValueError, r"'num_workers' must be >= 0 \(got -1\)"),
        ("num_workers", 1.5, TypeError, r"'num_workers' must be an int \(got 1.5\)"),
        ("fanouts", [5, -2], ValueError, r"'fanouts' entries must be ints >= -1"),
        # Past an int32, the kernels' sample counts overflowed (a Numba TypingError).
        ("fanouts", [5, 2**31], ValueError, r"'fanouts' entries .* at most 2147483647 \(2\^31"),
        ("fanouts", "5,5", TypeError, r"'fanouts' must be a sequence of ints"),
    ],
)
def test_config_names_the_field_and_value_it_refuses(field, value, error, message):
    with pytest.raises(error, match=message):
        TrainConfig(**{field: value})


def test_config_normalizes_and_is_frozen(tmp_path):
    config = TrainConfig(fanouts=[5, 5], device="cpu", checkpoint=str(tmp_path / "c.pt"))
    assert config.fanouts == (5, 5)
    assert config.device == torch.device("cpu")
    assert config.checkpoint == tmp_path / "c.pt"
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.lr = 0.1
    assert config.replace(lr=0.1).lr == 0.1
    with pytest.raises(ValueError, match="'precision'"):
        config.replace(precision="fp8")


@pytest.mark.parametrize(
    "options, kind",
    [
        ({}, NeighborBatches),
        ({"sampler": "labor"}, NeighborBatches),
        ({"sampler": "cluster"}, SubgraphBatches),
    ],
)
def test_the_first_kind_that_accepts_a_run_builds_it(dataset, options, kind):
    trainer = Trainer(model_for(dataset), dataset, [5, 5], 256, progress=False, **options)
    assert type(trainer.batches) is kind
    assert trainer.sampler == options.get("sampler", "neighbor")


def test_options_the_kind_would_ignore_are_refused(dataset):
    with pytest.raises(ValueError, match=r"'remote_cache' needs a partitioned graph"):
        Trainer(model_for(dataset), dataset, [5, 5], progress=False, remote_cache="5%")
    with pytest.raises(ValueError, match=r"'feature_cache' caches a GraphDataset's features"):
        Trainer(
            model_for(dataset), dataset, [5, 5], progress=False, sampler="saint", feature_cache=8
        )


class FirstBatchesOnly(SeedBatches):
    """A kind written outside the package: the neighbor loader's first two batches an epoch."""

    describes = "a test"

    @classmethod
    def accepts(cls, dataset, config, strategy) -> bool:
        return config.seed == 7

    def __init__(self, model, dataset, config, strategy):
        super().__init__(model, dataset, config, strategy)
        self.eval_module = SeedLogits(model, len(config.fanouts), config.forward)
        self.train_module = strategy.wrap(self.eval_module)
        seeds = torch.as_tensor(dataset.train_idx)[: 2 * self.worker_batch_size]
        self.loader = NeighborLoader(
            dataset, list(config.fanouts), batch_size=self.worker_batch_size, input_nodes=seeds
        )


def test_a_new_kind_is_one_registry_line_and_the_loop_runs_it(dataset, monkeypatch):
    monkeypatch.setattr(batches, "KINDS", (FirstBatchesOnly, *batches.KINDS))
    trainer = Trainer(model_for(dataset), dataset, [5, 5], 128, progress=False, seed=7)
    assert type(trainer.batches) is FirstBatchesOnly
    assert len(trainer.train_loader) == 2
    metrics = trainer.fit(1, eval_every=0)[0]
    assert metrics["epoch"] == 1
    assert metrics["seeds_per_s"] > 0
    assert metrics["traffic"]["feature_bytes"] > 0
    # Every other seed still gets the built-in kind.
    other = Trainer(model_for(dataset), dataset, [5, 5], 128, progress=False, seed=8)
    assert type(other.batches) is NeighborBatches
