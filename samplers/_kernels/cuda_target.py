"""Numba's CUDA target for the GPU kernels: whether it is there, launches, device memory and
the one collective the kernels need (an exclusive prefix sum).

The CUDA target comes from NVIDIA's ``numba-cuda`` package (graphengine's ``cuda`` extra);
without it, or without a GPU, :func:`available` is false and nothing here launches.
``NUMBA_ENABLE_CUDASIM=1`` runs the same kernels in Numba's simulator, one Python thread per
GPU thread, which is how CI without a GPU tests them (with ``NUMBA_DISABLE_JIT=1``: the
kernels call the CPU kernels' ``@njit`` draw functions, which the CUDA target compiles as
device functions and the simulator must run as the plain Python they are).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import numpy as np

try:
    from numba import cuda
except ImportError:  # numba-cuda is not installed
    cuda = None

from numba import config

SIMULATOR = bool(config.ENABLE_CUDASIM)
# Threads per block: the simulator runs each thread as a Python thread, so it gets small blocks.
THREADS = 32 if SIMULATOR else 256
SCAN_BLOCK = THREADS


def available() -> bool:
    """Whether CUDA kernels can run here: ``numba-cuda`` with a GPU, or its simulator."""
    return cuda is not None and (SIMULATOR or cuda.is_available())


def require() -> None:
    """Raise unless :func:`available`, saying what is missing."""
    if cuda is None:
        raise ImportError(
            "sampling on the GPU needs Numba's CUDA target: pip install 'graphengine[cuda]' "
            "(the numba-cuda package)"
        )
    if not available():
        raise RuntimeError(
            "sampling on the GPU needs a CUDA GPU, and numba-cuda finds none "
            "(numba.cuda.is_available() is False); sample on the CPU (device='cpu')"
        )


def blocks(count: int) -> int:
    """The blocks of :data:`THREADS` threads that cover ``count`` items (at least one)."""
    return max(1, -(-count // THREADS))


class DeviceMemory:
    """Where a GPU sampling call gets its stream and memory: this default gives each thread
    a non-blocking stream of its own (on the legacy default stream, the kernels would wait
    for the training step that torch queues there) and allocates with Numba. A caller with
    another allocator on the same GPU (torch's:
    ``graphengine.loader.device_sampling.TorchDeviceMemory``) passes its own."""

    _per_thread = threading.local()

    @contextlib.contextmanager
    def stream(self, device: int) -> Iterator:
        """The Numba stream the calling thread launches on, GPU ``device`` current."""
        if SIMULATOR:
            yield cuda.default_stream()
            return
        with cuda.gpus[device]:
            streams = self._per_thread.__dict__.setdefault("streams", {})
            if device not in streams:
                from cuda.bindings import driver

                error, handle = driver.cuStreamCreate(
                    driver.CUstream_flags.CU_STREAM_NON_BLOCKING.value
                )
                if error != driver.CUresult.CUDA_SUCCESS:
                    raise RuntimeError(f"cuStreamCreate failed: {error}")
                streams[device] = cuda.external_stream(int(handle))
            yield streams[device]

    def empty(self, count: int, dtype, device: int, stream):
        """An uninitialised device array of ``count`` entries, used on ``stream``."""
        return cuda.device_array(count, dtype=dtype, stream=stream)


class Stream:
    """One sampling call's stream on GPU ``device``, with memory from ``memory``; a context
    manager around the call. ``numba`` is the stream to launch on."""

    def __init__(self, device: int = 0, memory: DeviceMemory | None = None):
        self.device = device
        self.memory = memory if memory is not None else DeviceMemory()
        self._context = self.memory.stream(device)

    def __enter__(self) -> Stream:
        self.numba = self._context.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._context.__exit__(*exc)

    def empty(self, count: int, dtype):
        """An uninitialised device array of ``count`` entries."""
        return self.memory.empty(count, dtype, self.device, self.numba)

    def to_device(self, array: np.ndarray):
        """A device copy of the host ``array`` (1-D), in :meth:`empty`'s memory."""
        out = self.empty(array.shape[0], array.dtype)
        if array.shape[0]:
            out.copy_to_device(np.ascontiguousarray(array), stream=self.numba)
        return out

    def scalar(self, array, index: int) -> int:
        """``array[index]`` of a device array, read back to the host (waits for the kernels
        queued before)."""
        value = array[index : index + 1].copy_to_host(stream=self.numba)
        self.numba.synchronize()
        return int(value[0])

    def synchronize(self) -> None:
        self.numba.synchronize()


if cuda is not None:

    @cuda.jit(cache=True)
    def fill(values, value):
        """``values[:] = value``."""
        i = cuda.grid(1)
        if i < values.shape[0]:
            values[i] = value

    @cuda.jit(cache=True)
    def _scan_blocks(values, out, block_sums):
        """Each block's inclusive running sums of ``values`` into ``out[1:]``, and its total
        into ``block_sums``: Hillis and Steele's scan over one block in shared memory."""
        shared = cuda.shared.array(SCAN_BLOCK, dtype=np.int64)
        tid = cuda.threadIdx.x
        i = cuda.blockIdx.x * SCAN_BLOCK + tid
        n = values.shape[0]
        shared[tid] = values[i] if i < n else 0
        cuda.syncthreads()
        offset = 1
        while offset < SCAN_BLOCK:
            before = shared[tid - offset] if tid >= offset else 0
            cuda.syncthreads()
            shared[tid] += before
            cuda.syncthreads()
            offset *= 2
        if i < n:
            out[i + 1] = shared[tid]
        if tid == SCAN_BLOCK - 1:
            block_sums[cuda.blockIdx.x] = shared[tid]

    @cuda.jit(cache=True)
    def _add_block_offsets(out, block_offsets):
        """Adds the sum of the earlier blocks (``block_offsets``, exclusive) to each block's
        entries of ``out[1:]``, and sets ``out[0] = 0``."""
        i = cuda.grid(1)
        if i == 0:
            out[0] = 0
        if i < out.shape[0] - 1:
            out[i + 1] += block_offsets[i // SCAN_BLOCK]


def exclusive_sum(stream: Stream, values) -> tuple:
    """The running sums of ``values`` (int64 device array ``[n]``) from 0: int64 ``[n + 1]``
    on the device, ``out[i]`` the sum of ``values[:i]``, and ``out[n]`` read back as an int."""
    out = _running_sums(stream, values)
    return out, stream.scalar(out, values.shape[0])


def _running_sums(stream: Stream, values):
    """:func:`exclusive_sum`'s device array, without reading anything back. Three passes on
    ``stream``: block scans, a scan of the block totals (recursively), their addition."""
    n = values.shape[0]
    out = stream.empty(n + 1, np.int64)
    if n == 0:
        fill[1, 1, stream.numba](out, 0)
        return out
    count = -(-n // SCAN_BLOCK)
    block_sums = stream.empty(count, np.int64)
    _scan_blocks[count, SCAN_BLOCK, stream.numba](values, out, block_sums)
    block_offsets = _running_sums(stream, block_sums) if count > 1 else filled(stream, 1, 0)
    _add_block_offsets[blocks(n), THREADS, stream.numba](out, block_offsets)
    return out


def filled(stream: Stream, count: int, value: int):
    """An int64 device array of ``count`` entries, all ``value``."""
    out = stream.empty(count, np.int64)
    if count:
        fill[blocks(count), THREADS, stream.numba](out, value)
    return out
