"""Sampling on the GPU in the loaders: where a loader samples (:func:`sampling_device`) and
the stream and memory its GPU sampler uses (:class:`TorchDeviceMemory`).

A loader whose batches go to a CUDA ``device`` samples there by default, with
:class:`samplers.NeighborSampler`'s GPU kernels, when the options are ones those kernels
draw (node-wise, unweighted, directional, homogeneous) and Numba's CUDA target finds the GPU;
``sample_on="cpu"`` keeps sampling on the CPU, ``sample_on="cuda"`` asks for the GPU
whatever the batches' device (an error where it cannot). The GPU's batches equal the CPU's.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import numpy as np
import torch

from graphengine.loader.config import LoadingConfig, SamplingConfig
from samplers._kernels import cuda_target
from samplers._kernels.cuda_target import DeviceMemory, cuda
from samplers.device import cuda_index

SAMPLE_ON = ("cpu", "cuda")


def sampling_device(
    sample_on: str | torch.device | None,
    loading: LoadingConfig,
    sampling: SamplingConfig,
    homogeneous: bool,
    weighted: bool,
) -> torch.device | None:
    """The GPU a loader samples on, or ``None`` for the CPU.

    Args:
        sample_on: ``"cpu"``, ``"cuda"`` (or ``"cuda:N"``, a ``torch.device``), or ``None``:
            the batches' ``device`` when it is a GPU and the options allow it.
        loading: the loader's loading options (its ``device``).
        sampling: the loader's sampling options.
        homogeneous: the data is one node and edge type, sampled by graphengine's sampler.
        weighted: ``weight_attr`` names weights.

    Raises:
        ValueError: ``sample_on`` is not a device, or asks for the GPU with options the GPU
            kernels do not draw.
    """
    if sample_on is None:
        if not loading.copies_to_cuda or not cuda_target.available():
            return None
        if _gpu_refusal(sampling, homogeneous, weighted) is not None:
            return None
        return loading.device
    try:
        index = cuda_index(sample_on)
    except ValueError:
        raise ValueError(
            f"'sample_on' must be 'cpu', 'cuda' or 'cuda:N' (got {sample_on!r})"
        ) from None
    if index is None:
        return None
    refusal = _gpu_refusal(sampling, homogeneous, weighted)
    if refusal is not None:
        raise ValueError(f"sample_on={sample_on!r}: {refusal} is sampled on the CPU only")
    return torch.device("cuda", index)


def _gpu_refusal(sampling: SamplingConfig, homogeneous: bool, weighted: bool) -> str | None:
    """What in the options keeps sampling off the GPU, or ``None``."""
    if not homogeneous:
        return "heterogeneous or remote data, or a user's sampler,"
    if sampling.kind != "neighbor":
        return f"{sampling.kind!r} sampling"
    if weighted:
        return "weighted sampling ('weight_attr')"
    if sampling.subgraph_type != "directional":
        return f"subgraph_type={sampling.subgraph_type!r}"
    return None


class TorchDeviceMemory(DeviceMemory):
    """Streams and memory for GPU sampling from torch: each thread samples on a torch side
    stream of its own (not the default stream the training step runs on) into blocks of
    torch's caching allocator, which later batches reuse without ``cuMemFree`` (Numba's
    allocator frees with it, and it waits for the whole GPU). Each block is also marked as
    used on the default stream, so that a batch's arrays, which the training step reads
    there, are not handed to a later call before that stream is done with them."""

    _per_thread = threading.local()

    @contextlib.contextmanager
    def stream(self, device: int) -> Iterator:
        streams = self._per_thread.__dict__.setdefault("streams", {})
        if device not in streams:
            streams[device] = torch.cuda.Stream(device)
        side = streams[device]
        with cuda.gpus[device], torch.cuda.stream(side):
            yield cuda.external_stream(side.cuda_stream)

    def empty(self, count: int, dtype, device: int, stream):
        tensor = torch.empty(
            count, dtype=getattr(torch, np.dtype(dtype).name), device=torch.device("cuda", device)
        )
        tensor.record_stream(torch.cuda.default_stream(device))
        return cuda.as_cuda_array(tensor)


def as_device_tensor(array) -> torch.Tensor:
    """A GPU sampler's device array as a torch tensor over the same memory (no copy), a host
    array as ``torch.from_numpy``'s."""
    if hasattr(array, "__cuda_array_interface__"):
        return torch.as_tensor(array)  # on the GPU that holds it
    return torch.from_numpy(array)
