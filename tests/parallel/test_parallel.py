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


@pytest.fixture(params=["gloo", pytest.param("nccl", id="nccl")])
def one_worker_group(request, tmp_path):
    """A world-size-1 process group of each backend; NCCL (one process per GPU) only where
    there is a GPU, which ``.ci/gpu-check`` runs."""
    backend = request.param
    if backend == "nccl" and not (torch.cuda.is_available() and dist.is_nccl_available()):
        pytest.skip("NCCL needs a CUDA device")
    if backend == "nccl":
        torch.cuda.set_device(0)
    dist.init_process_group(
        backend, init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1
    )
    yield backend
    dist.destroy_process_group()


def test_data_parallel_reduces_through_the_group(one_worker_group):
    device = "cuda:0" if one_worker_group == "nccl" else "cpu"
    strategy = DataParallel(device)
    assert (strategy.rank, strategy.world_size, strategy.backend) == (0, 1, one_worker_group)
    assert strategy.sum([3, 4.5]) == [3.0, 4.5]
    assert strategy.gather_objects({"a": 1}) == [{"a": 1}]
    module = torch.nn.Linear(2, 2).to(device)
    wrapped = strategy.wrap(module)
    assert isinstance(wrapped, torch.nn.parallel.DistributedDataParallel)
    wrapped(torch.ones(3, 2, device=device)).sum().backward()  # DDP's all-reduce of gradients
    assert torch.allclose(module.weight.grad.cpu(), torch.full((2, 2), 3.0))


def test_nccl_refuses_a_cpu_device(monkeypatch, one_worker_group):
    monkeypatch.setattr(dist, "get_backend", lambda: "nccl")
    with pytest.raises(ValueError, match=r"the NCCL backend needs a CUDA 'device' \(got cpu\)"):
        DataParallel("cpu")


def test_data_parallel_needs_a_group():
    with pytest.raises(RuntimeError, match=r"needs a joined torch\.distributed process group"):
        DataParallel("cpu")
