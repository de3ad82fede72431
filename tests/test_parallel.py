"""Parallel strategies: where collective tensors live, and the reductions the loop relies on."""

import pytest
import torch
import torch.distributed as dist

from graphengine.parallel import DataParallel, SingleProcess, strategy_for
from graphengine.parallel.data_parallel import collective_device


def test_collectives_use_the_backends_device():
    cuda = torch.device("cuda", 1)
    assert collective_device("nccl", cuda) == cuda  # NCCL rejects CPU tensors
    assert collective_device("gloo", cuda) == torch.device("cpu")
    assert collective_device("gloo", torch.device("cpu")) == torch.device("cpu")


def test_single_process_reduces_to_itself():
    strategy = SingleProcess("cpu")
    module = torch.nn.Linear(2, 2)
    assert strategy.wrap(module) is module
    assert strategy.sum([1, 2.5]) == [1.0, 2.5]
    assert strategy.gather_objects("x") == ["x"]
    assert strategy.is_writer and strategy_for("cpu").world_size == 1


@pytest.fixture
def one_worker_group(tmp_path):
    dist.init_process_group(
        "gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1
    )
    yield
    dist.destroy_process_group()


def test_data_parallel_reduces_through_the_group(one_worker_group):
    strategy = DataParallel("cpu")
    assert (strategy.rank, strategy.world_size, strategy.backend) == (0, 1, "gloo")
    assert strategy.sum([3, 4.5]) == [3.0, 4.5]
    assert strategy.gather_objects({"a": 1}) == [{"a": 1}]
    wrapped = strategy.wrap(torch.nn.Linear(2, 2))
    assert isinstance(wrapped, torch.nn.parallel.DistributedDataParallel)


def test_data_parallel_needs_a_group():
    with pytest.raises(RuntimeError, match=r"needs a joined torch\.distributed process group"):
        DataParallel("cpu")
