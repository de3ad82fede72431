"""Loaders sampling on the GPU (``NeighborLoader(sample_on="cuda")``, and by default for a
CUDA ``device``): the batches equal the CPU-sampled ones, in Numba's CUDA simulator (a
process of its own) and, where there is a GPU, with every id on it; and where a loader
samples (:func:`graphengine.loader.device_sampling.sampling_device`)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from graphengine.loader import NeighborLoader
from graphengine.loader.config import LoadingConfig, SamplingConfig
from graphengine.loader.device_sampling import sampling_device
from samplers._kernels import cuda_target
from tests.helpers.cuda_simulator import simulated
from tests.loader import gpu_loader_cases

CUDA = torch.cuda.is_available() and cuda_target.available()


@pytest.fixture(scope="module")
def simulated_batches(tmp_path_factory) -> dict[str, np.ndarray]:
    return simulated(
        "tests.loader.gpu_loader_cases", tmp_path_factory.mktemp("gpu-loader") / "batches.npz"
    )


@pytest.mark.skipif(cuda_target.cuda is None, reason="numba-cuda is not installed")
@pytest.mark.parametrize("name", sorted(gpu_loader_cases.cases()))
def test_simulated_gpu_sampling_gives_the_cpu_batches(simulated_batches, name):
    for i, batch in enumerate(gpu_loader_cases.batches(name, "cpu")):
        for field, want in batch.items():
            np.testing.assert_array_equal(simulated_batches[f"{name}/{i}/{field}"], want, field)


@pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU and numba-cuda")
@pytest.mark.parametrize("name", sorted(gpu_loader_cases.cases()))
def test_loader_on_a_gpu_samples_there_and_gives_the_cpu_batches(name):
    case = gpu_loader_cases.cases()[name]
    loader = NeighborLoader(**case, device="cuda", num_workers=2)
    assert loader.neighbor_sampler.device.startswith("cuda")
    expected = gpu_loader_cases.batches(name, "cpu")
    for batch, want in zip(loader, expected, strict=False):
        assert batch.n_id.is_cuda and batch.edge_index.is_cuda and batch.x.is_cuda
        for field, value in want.items():
            np.testing.assert_array_equal(batch[field].cpu().numpy(), value, field)


def _loading(device=None):
    """A loading config whose batches go to ``device``; for CUDA on a torch without it
    (``LoadingConfig`` refuses that) a stand-in with the two fields the choice reads."""
    if device == "cuda" and not torch.cuda.is_available():
        return SimpleNamespace(device=torch.device("cuda"), copies_to_cuda=True)
    return LoadingConfig(device=device)


def test_cpu_batches_sample_on_the_cpu_by_default():
    assert sampling_device(None, _loading(), SamplingConfig([2]), True, False) is None
    assert sampling_device("cpu", _loading("cuda"), SamplingConfig([2]), True, False) is None


@pytest.mark.parametrize(
    ("sampling", "homogeneous", "weighted", "match"),
    [
        (SamplingConfig([2], kind="labor"), True, False, "'labor' sampling"),
        (SamplingConfig([2]), True, True, "weighted sampling"),
        (SamplingConfig([2], subgraph_type="induced"), True, False, "subgraph_type='induced'"),
        (SamplingConfig([2]), False, False, "heterogeneous or remote data"),
    ],
)
def test_gpu_sampling_of_options_it_does_not_draw_is_refused(
    sampling, homogeneous, weighted, match
):
    with pytest.raises(ValueError, match=match):
        sampling_device("cuda", _loading("cuda"), sampling, homogeneous, weighted)
    # by default such a loader samples on the CPU
    assert sampling_device(None, _loading("cuda"), sampling, homogeneous, weighted) is None


def test_sample_on_must_be_a_device():
    with pytest.raises(ValueError, match="'sample_on' must be"):
        sampling_device("tpu", _loading(), SamplingConfig([2]), True, False)
