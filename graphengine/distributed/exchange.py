"""Batched exchanges between the workers of a partition: one message per peer per call.

Each call is two ``torch.distributed.all_to_all_single`` collectives over the exchange's own
process group: the sizes (one int64 per peer), then the payload, every peer's part in one
tensor. Gloo and NCCL both run them; no RPC. A group of its own lets a loader thread exchange
while the training thread all-reduces gradients on the default group.

Collectives pair up by order: every worker must make the same calls in the same order
(the samplers and loaders built on this do, batch by batch, from one thread each).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.distributed as dist


@dataclass
class ExchangeStats:
    """What an :class:`Exchange` moved, summed since the last :meth:`Exchange.reset_stats`.

    Attributes:
        calls: exchanges made.
        sent_bytes, received_bytes: payload bytes to and from other workers (not counting
            what a worker sends itself).
        seconds: wall time spent inside the collectives.
    """

    calls: int = 0
    sent_bytes: int = 0
    received_bytes: int = 0
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return {
            "calls": self.calls,
            "sent_bytes": self.sent_bytes,
            "received_bytes": self.received_bytes,
            "seconds": round(self.seconds, 4),
        }


@dataclass
class Exchange:
    """All-to-all exchanges of NumPy arrays within ``group``.

    Args:
        group: the process group (``None``: the default group). Give each thread that
            exchanges a group of its own (:func:`new_exchange`).
        device: where the payload goes through the backend: the CPU for gloo, this worker's
            CUDA device for NCCL.
    """

    group: dist.ProcessGroup | None = None
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    stats: ExchangeStats = field(default_factory=ExchangeStats)

    def __post_init__(self):
        self.rank = dist.get_rank(self.group)
        self.world_size = dist.get_world_size(self.group)
        self._lock = threading.Lock()

    def all_to_all(self, sends: Sequence[np.ndarray | torch.Tensor]) -> list[torch.Tensor]:
        """Send ``sends[p]`` to worker ``p``; returns what each worker sent this one (CPU
        tensors, views of one received buffer).

        Every array (NumPy or a CPU tensor) must have the same dtype and the same trailing
        shape (``[n_p, ...]``, ``n_p`` free), on every worker.

        Raises:
            ValueError: not one array per worker, or arrays of different dtypes or trailing
                shapes.
        """
        if len(sends) != self.world_size:
            raise ValueError(
                f"'sends' must hold one array per worker ({self.world_size}), got {len(sends)}"
            )
        tensors = [torch.as_tensor(a) for a in sends]
        dtype, tail = tensors[0].dtype, tuple(tensors[0].shape[1:])
        for p, tensor in enumerate(tensors):
            if tensor.dtype != dtype or tuple(tensor.shape[1:]) != tail:
                raise ValueError(
                    f"every array sent must be {dtype} [n, {', '.join(map(str, tail))}] "
                    f"(got {tensor.dtype} {list(tensor.shape)} for worker {p})"
                )
        started = time.perf_counter()
        counts = torch.tensor([t.shape[0] for t in tensors], dtype=torch.int64)
        payload = torch.cat(tensors)
        with self._lock:
            received = self._exchange(counts.view(-1, 1), [1] * self.world_size, None)
            in_counts = received.view(-1).tolist()
            out = self._exchange(payload, in_counts, counts.tolist())
        row_bytes = payload.element_size() * int(np.prod(tail, dtype=np.int64))
        self.stats.calls += 1
        self.stats.sent_bytes += row_bytes * (int(counts.sum()) - int(counts[self.rank]))
        self.stats.received_bytes += row_bytes * (sum(in_counts) - in_counts[self.rank])
        self.stats.seconds += time.perf_counter() - started
        return list(torch.split(out, in_counts))

    def all_to_all_numpy(self, sends: Sequence[np.ndarray]) -> list[np.ndarray]:
        """:meth:`all_to_all` with NumPy arrays back (views of one received buffer)."""
        return [part.numpy() for part in self.all_to_all(sends)]

    def reset_stats(self) -> ExchangeStats:
        """The stats so far; starts counting anew."""
        stats, self.stats = self.stats, ExchangeStats()
        return stats

    def _exchange(
        self, payload: torch.Tensor, in_counts: list[int], out_counts: list[int] | None
    ) -> torch.Tensor:
        out = torch.empty((sum(in_counts), *payload.shape[1:]), dtype=payload.dtype)
        if self.device.type == "cpu":
            dist.all_to_all_single(out, payload, in_counts, out_counts, group=self.group)
            return out
        on_device = out.to(self.device)
        dist.all_to_all_single(
            on_device, payload.to(self.device), in_counts, out_counts, group=self.group
        )
        return on_device.cpu()


def new_exchange(device: torch.device | None = None) -> Exchange:
    """An :class:`Exchange` over a new process group of every worker (a collective: every
    worker must call it, in the same order as its other groups)."""
    backend = dist.get_backend()
    group = dist.new_group(backend=backend)
    return Exchange(group, device or torch.device("cpu"))
