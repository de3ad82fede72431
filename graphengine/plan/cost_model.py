"""The cost model: a candidate's epoch seconds from probed rates and counted volumes.

Every term is a volume of :class:`~graphengine.plan.volumes.Volumes` over a rate of
:class:`~graphengine.plan.probes.Rates`; nothing is fitted. Per step and worker:

- ``compute = flops / compute rate`` (hybrid: its split step's rate; partitioned: the
  rate of its steps beside the distributed loader's threads);
- ``sample = sampled edges / sampling rate`` (on a partition, the distributed sampler's,
  whose exchanges its rate includes);
- ``gather = gathered bytes / gather rate`` (hybrid: its columns' rate);
- a collective's seconds ``= latency + bytes a worker sends / bandwidth``, the all-reduce's
  and the all-to-all's each probed; a ring all-reduce takes ``2 (W-1)`` steps and gloo's
  all-to-all ``W-1`` pairwise exchanges, so at another ``W`` (projection) the latency scales
  with ``W-1``;
- gradients: at the rate the probe's replicated steps' all-reduce ran amid their loader's
  threads (the link's latency and bandwidth at a given ``--link-gbps``); DDP all-reduces
  its buckets as backward fills them; the first bucket (the last
  layers' gradients) overlaps the rest of backward, every later bucket waits at the end of
  it, and a model of one bucket waits whole (these models' gradients fit in one);
- hybrid: the partial results' all-to-all, forward and backward, sits between the first
  layer and the rest, on the critical path, at the rate the probe's hybrid steps saw
  (with their loader's threads beside them; the link's rate at a given ``--link-gbps``);
  the first-layer structure's all-gather runs in the loader's ``share`` stage;
- partitioned: the remote rows' fetch (three exchanges: ids, rows, labels) runs in the
  loader's ``fetch`` stage.

How the stages overlap, as :mod:`graphengine.loader.pipeline` runs them: each loader stage
(``sample``, hybrid's ``share``, ``gather`` or ``fetch``) is a thread of its own working on
the batches ahead of the caller's, so a step takes the longest of the caller's path
(``compute`` + the exchanges it waits for) and each stage's seconds. The rates were probed
with those threads running beside the steps, as training runs them, so where they share too
few cores the time they take from each other is inside each rate. An epoch is its steps
plus one batch through the loader's stages before the first step can start.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from graphengine.plan.probes import Rates
from graphengine.plan.volumes import Volumes, ring_bytes

#: Collectives a call of :class:`~graphengine.distributed.Exchange` makes: the sizes, then
#: the payload.
EXCHANGE_COLLECTIVES = 2
#: Exchanges of one partitioned fetch: the ids asked, the rows and the labels back.
FETCH_EXCHANGES = 3


@dataclass(frozen=True)
class Link:
    """The link between workers: each collective's latency (s) at ``workers`` workers and the
    bytes per second one worker sends; ``partial_bytes_per_s``: hybrid's partial results'
    all-to-all as its steps sent it (0: the all-to-all's bandwidth);
    ``gradient_bytes_per_s``: the gradients' all-reduce as replicated steps sent it (0: the
    all-reduce's latency and bandwidth)."""

    allreduce_latency_s: float
    allreduce_bytes_per_s: float
    alltoall_latency_s: float
    alltoall_bytes_per_s: float
    workers: int
    partial_bytes_per_s: float = 0.0
    gradient_bytes_per_s: float = 0.0

    @classmethod
    def probed(cls, rates: Rates, workers: int, gbps: float | None = None) -> Link:
        """The probed link, at ``workers`` (its latencies scaled by ``W-1``), at ``gbps``
        gigabits per second instead of the probed bandwidth when given."""
        bandwidth = None if gbps is None else gbps * 1e9 / 8
        return cls(
            rates.allreduce_latency_s,
            bandwidth or rates.allreduce_bytes_per_s,
            rates.alltoall_latency_s,
            bandwidth or rates.alltoall_bytes_per_s,
            workers,
            0.0 if bandwidth else rates.partial_bytes_per_s,
            0.0 if bandwidth else rates.gradient_bytes_per_s,
        )

    def at(self, workers: int) -> Link:
        """This link with ``workers`` workers on it (latencies scaled by ``W-1``)."""
        scale = max(workers - 1, 1) / max(self.workers - 1, 1)
        return Link(
            self.allreduce_latency_s * scale,
            self.allreduce_bytes_per_s,
            self.alltoall_latency_s * scale,
            self.alltoall_bytes_per_s,
            workers,
            self.partial_bytes_per_s,
            self.gradient_bytes_per_s,
        )

    def allreduce_s(self, buffer_bytes: float) -> float:
        """A gradient bucket's all-reduce: at the rate replicated steps saw where it was
        probed (amid their loader's threads), else the link's latency and bandwidth."""
        sent = ring_bytes(buffer_bytes, self.workers)
        if self.gradient_bytes_per_s:
            return sent / self.gradient_bytes_per_s
        return self.allreduce_latency_s + sent / self.allreduce_bytes_per_s

    def alltoall_s(self, sent_bytes: float, calls: int = 1) -> float:
        return calls * self.alltoall_latency_s + sent_bytes / self.alltoall_bytes_per_s

    def partials_s(self, sent_bytes: float) -> float:
        """Hybrid's partial results forward and their gradients backward: two all-to-alls
        sending ``sent_bytes`` in all, at the rate hybrid's steps saw where it was probed."""
        if not self.partial_bytes_per_s:
            return self.alltoall_s(sent_bytes, calls=2)
        return 2 * self.alltoall_latency_s + sent_bytes / self.partial_bytes_per_s


@dataclass
class Prediction:
    """One candidate's predicted epoch and its parts (seconds per epoch, each part alone;
    they overlap as the module's docstring says, so ``epoch_s`` is not their sum).

    ``stages``: per-step seconds of the caller's path and of each loader stage, the largest
    of which is ``step_s``.
    """

    name: str
    epoch_s: float
    step_s: float
    steps: int
    compute_s: float
    sampling_s: float
    gather_s: float
    exchange_s: float
    setup_s: float = 0.0
    stages: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


def predict(volumes: Volumes, rates: Rates, link: Link, hybrid: bool, partitioned: bool):
    """The :class:`Prediction` of a candidate with ``volumes`` on ``rates`` and ``link``."""
    if hybrid:
        compute_rate = rates.hybrid_compute_flops_per_s
    elif partitioned:
        compute_rate = rates.dist_compute_flops_per_s or rates.compute_flops_per_s
    else:
        compute_rate = rates.compute_flops_per_s
    compute = volumes.flops / compute_rate
    sample_rate = rates.dist_sample_edges_per_s if partitioned else rates.sample_edges_per_s
    sample = volumes.counts.sampled_edges / sample_rate
    gather_rate = rates.column_gather_bytes_per_s if hybrid else rates.gather_bytes_per_s
    gather = volumes.gathered_bytes / gather_rate

    buckets = volumes.gradient_buckets
    waited = buckets if len(buckets) == 1 else buckets[1:]
    gradients = sum(link.allreduce_s(b) for b in waited)
    partials = link.partials_s(volumes.partial_bytes) if hybrid else 0.0
    structure = (
        link.alltoall_s(volumes.structure_bytes, calls=EXCHANGE_COLLECTIVES) if hybrid else 0.0
    )
    fetch = 0.0
    if partitioned and not hybrid:
        fetch = link.alltoall_s(volumes.fetched_bytes, calls=FETCH_EXCHANGES * EXCHANGE_COLLECTIVES)

    caller = compute + gradients + partials
    loader_stages = {"sample": sample, "share": structure, "gather": gather + fetch}
    stages = {"caller": caller, **loader_stages}
    step = max(stages.values())
    first_batch = sum(loader_stages.values())
    steps = volumes.steps
    setup = link.alltoall_s(volumes.setup_bytes, calls=EXCHANGE_COLLECTIVES) if hybrid else 0.0
    return Prediction(
        name=volumes.name,
        epoch_s=steps * step + first_batch,
        step_s=step,
        steps=steps,
        compute_s=steps * compute,
        sampling_s=steps * sample,
        gather_s=steps * gather,
        exchange_s=steps * (gradients + partials + structure + fetch),
        setup_s=setup if volumes.setup_bytes else 0.0,
        stages=stages,
    )
