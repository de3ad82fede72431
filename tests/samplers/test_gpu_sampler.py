"""Sampling on the GPU (``NeighborSampler(device="cuda")``) draws the CPU's batches, bit for
bit: every case of :mod:`tests.samplers.gpu_cases`, on a GPU where there is one, else in
Numba's CUDA simulator (a process of its own); and the kernels compile for a real GPU
(to PTX, where NVRTC and NVVM are installed)."""

from __future__ import annotations

import numpy as np
import pytest

from samplers import NeighborSampler, SamplerInput
from samplers._kernels import cuda_target
from tests.helpers.cuda_simulator import simulated
from tests.samplers import gpu_cases

needs_numba_cuda = pytest.mark.skipif(
    cuda_target.cuda is None, reason="numba-cuda is not installed"
)


@pytest.fixture(scope="module")
def gpu_batches(tmp_path_factory) -> dict[str, np.ndarray]:
    if cuda_target.available():
        return {**gpu_cases.gpu_batches(), **gpu_cases.gpu_scans()}
    return simulated("tests.samplers.gpu_cases", tmp_path_factory.mktemp("gpu") / "batches.npz")


@needs_numba_cuda
@pytest.mark.parametrize("name", sorted(gpu_cases.cases()))
@pytest.mark.parametrize("seed", gpu_cases.SEEDS)
def test_gpu_batches_equal_cpu_batches(gpu_batches, name, seed):
    expected = gpu_cases.sample(gpu_cases.cases()[name], seed, "cpu")
    for field in gpu_cases.FIELDS:
        want = getattr(expected, field)
        key = f"{name}/{seed}/{field}"
        if want is None:
            assert key not in gpu_batches, field
        else:
            np.testing.assert_array_equal(gpu_batches[key], want, err_msg=field)
    counts = expected.num_sampled_nodes + expected.num_sampled_edges
    np.testing.assert_array_equal(gpu_batches[f"{name}/{seed}/counts"], counts)


@needs_numba_cuda
@pytest.mark.parametrize("length", gpu_cases.SCAN_LENGTHS)
def test_gpu_prefix_sums(gpu_batches, length):
    values = gpu_cases.scan_values(length)
    want = np.concatenate([[0], np.cumsum(values)])
    np.testing.assert_array_equal(gpu_batches[f"scan/{length}"], np.append(want, want[-1]))


def test_cpu_output_to_host_is_itself():
    indptr, indices = gpu_cases.cases()["uniform"]["graph"]
    out = NeighborSampler(indptr, indices, [2]).sample_from_nodes(
        SamplerInput(np.array([1, 2]), np.arange(2), seed=0)
    )
    assert not out.on_device
    assert out.to_host() is out


@pytest.mark.parametrize(
    ("option", "match"),
    [
        ("weights", "weighted sampling"),
        ("induced", "subgraph_type='induced'"),
        ("bidirectional", "subgraph_type='bidirectional'"),
    ],
)
def test_gpu_refuses_what_it_does_not_sample(option, match):
    indptr, indices = gpu_cases.cases()["uniform"]["graph"]
    if option == "weights":
        options = {"weights": np.ones(indices.shape[0])}
    else:
        options = {"subgraph_type": option}
    with pytest.raises(ValueError, match=match):
        NeighborSampler(indptr, indices, [2], device="cuda", **options)


@pytest.mark.parametrize("device", ["tpu", "cuda:x", "gpu:0"])
def test_unknown_device_is_refused(device):
    indptr, indices = gpu_cases.cases()["uniform"]["graph"]
    with pytest.raises(ValueError, match="'device' must be"):
        NeighborSampler(indptr, indices, [2], device=device)


def test_bad_graph_placement_is_refused():
    indptr, indices = gpu_cases.cases()["uniform"]["graph"]
    if not cuda_target.available():
        pytest.skip("needs a GPU or the simulator to get past the device check")
    with pytest.raises(ValueError, match="'placement' must be one of"):
        NeighborSampler(indptr, indices, [2], device="cuda", graph_placement="disk")


@pytest.mark.skipif(cuda_target.available(), reason="a GPU is there")
def test_gpu_sampling_without_a_gpu_says_so():
    indptr, indices = gpu_cases.cases()["uniform"]["graph"]
    with pytest.raises((RuntimeError, ImportError), match="sampling on the GPU needs"):
        NeighborSampler(indptr, indices, [2], device="cuda")


def _ptx_compiler():
    """``numba.cuda.compile_ptx``, or a skip where NVRTC or NVVM cannot be loaded."""
    if cuda_target.cuda is None or cuda_target.SIMULATOR:
        pytest.skip("numba-cuda is not installed, or this is the simulator")
    from numba import cuda, types

    try:
        cuda.compile_ptx(lambda a: None, (types.int64[:],), cc=(9, 0))
    except Exception as error:  # the libraries are found when a kernel is compiled
        pytest.skip(f"no NVRTC or NVVM to compile with: {type(error).__name__}")
    return cuda.compile_ptx


def test_kernels_compile_for_a_gpu():
    """Every kernel, with the argument types the sampler launches it with, compiles to PTX
    for a Hopper GPU (sm_90): what CI can check of the real target without one."""
    compile_ptx = _ptx_compiler()
    from numba import types

    from samplers._kernels import neighbor_cuda as k

    i64 = types.Array(types.int64, 1, "A")
    i32 = types.Array(types.int32, 1, "A")
    n, b, u = types.int64, types.boolean, types.uint64
    signatures = {
        k.hop_ranges: [(i64, i64, i64, i64, b, n, b, i64, i64, i64)],
        k.hop_draw: [(i64, i64, i64, n, b, u, i64, n, i64, i64)],
        k.hop_neighbors: [(i64, i64, i64, i64, i64, i64), (i32, i64, i64, i64, i64, i64)],
        k.insert_nodes: [(i64, n, i64, i64, n)],
        k.claim_rows: [(i64, i64, i64, i64, i64, n)],
        k.mark_first: [(i64, i64, i64, i64)],
        k.number_new: [(i64, i64, i64, n, i64, i64)],
        k.rows_to_local: [(i64, i64, i64)],
        k.split_keys: [(i64, i64, i64)],
        cuda_target.fill: [(i64, n)],
        cuda_target._scan_blocks: [(i64, i64, i64)],
        cuda_target._add_block_offsets: [(i64, i64)],
    }
    for kernel, variants in signatures.items():
        for signature in variants:
            ptx, _ = compile_ptx(kernel.py_func, signature, cc=(9, 0))
            assert ".entry" in ptx, kernel.py_func.__name__
