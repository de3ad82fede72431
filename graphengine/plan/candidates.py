"""The candidates: the ways to train a plan weighs, and each one's volumes and memory per
worker.

- ``data``: ``graphengine train --parallel data`` (every worker the whole dataset);
- ``hybrid``: ``--parallel hybrid`` (every worker the graph, ``F/W`` of the feature columns);
- ``partitioned``: ``--parallel data --partitions DIR`` (each worker a part, remote feature
  rows fetched, a cache of them with ``--remote-cache``);
- ``hybrid-partitioned``: ``--parallel hybrid --partitions DIR`` (each worker a part of the
  structure and ``F/W`` of every node's columns, exchanged once before training).

With a dataset on every worker the first two are candidates, with a partition the last
two, with both all four.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from graphengine.plan.volumes import (
    FLOAT_BYTES,
    BatchCounts,
    Memory,
    Volumes,
    ddp_buckets,
    layer_flops,
)


@dataclass(frozen=True)
class Candidate:
    """A way to train: its ``train`` options."""

    name: str
    parallel: str
    partitioned: bool

    @property
    def hybrid(self) -> bool:
        return self.parallel == "hybrid"

    @property
    def command(self) -> str:
        partitions = " --partitions DIR" if self.partitioned else ""
        return f"graphengine train --parallel {self.parallel}{partitions}"


#: The strategies the planner weighs, by name: ``"data"``, ``"hybrid"``, ``"partitioned"`` and
#: ``"hybrid-partitioned"`` (each a :class:`Candidate`: its parallel mode and whether it
#: trains from a partitioned graph).
CANDIDATES = {
    c.name: c
    for c in (
        Candidate("data", "data", False),
        Candidate("hybrid", "hybrid", False),
        Candidate("partitioned", "data", True),
        Candidate("hybrid-partitioned", "hybrid", True),
    )
}


def candidates_for(has_dataset: bool, has_partitions: bool, workers: int) -> list[Candidate]:
    """The candidates of a run with a dataset on every worker and/or a partition; hybrid
    ones need 2 or more workers."""
    names = []
    if has_dataset:
        names += ["data", "hybrid"]
    if has_partitions:
        names += ["partitioned", "hybrid-partitioned"]
    if not names:
        raise ValueError("a plan needs a dataset on every worker or a partition (got neither)")
    return [CANDIDATES[n] for n in names if workers > 1 or not CANDIDATES[n].hybrid]


@dataclass(frozen=True)
class ModelShape:
    """What the volumes need of the model: ``widths`` (input, hidden..., classes),
    ``parameter_bytes`` per parameter in the model's order, ``replicated_bytes`` those hybrid
    keeps replicated (all but the first layer's weights on the input columns), ``whole``
    (its first layer computes every node)."""

    widths: tuple[int, ...]
    parameter_bytes: tuple[int, ...]
    replicated_bytes: tuple[int, ...]
    whole: bool

    @classmethod
    def of(cls, model: torch.nn.Module, hops: int) -> ModelShape:
        from graphengine.nn.forward import SeedLogits
        from graphengine.parallel.hybrid import runs_whole

        seed_logits = SeedLogits(model, hops)
        in_width = int(model.in_channels)
        first = {id(p) for p in model.convs[0].parameters()}
        parameters = [p for p in model.parameters() if p.requires_grad]
        sizes = tuple(p.numel() * p.element_size() for p in parameters)
        # The first layer's weights on the input columns are what hybrid splits.
        replicated = tuple(
            p.numel() * p.element_size()
            for p in parameters
            if not (id(p) in first and p.dim() == 2 and p.shape[1] == in_width)
        )
        widths = (in_width, *[int(c.out_channels) for c in model.convs])
        return cls(widths, sizes, replicated, runs_whole(seed_logits))


@dataclass(frozen=True)
class GraphSize:
    """What a worker holds of the graph: ``nodes`` and ``edges`` of the whole graph, its
    part's ``part_nodes`` and ``part_edges``, ``index_bytes`` per edge index, ``features``."""

    nodes: int
    edges: int
    features: int
    index_bytes: int = 4
    part_nodes: int = 0
    part_edges: int = 0


def volumes_of(
    candidate: Candidate,
    shape: ModelShape,
    counts: BatchCounts,
    workers: int,
    steps: int,
    graph: GraphSize,
    cache: dict | None = None,
    on_gpu: bool = False,
) -> Volumes:
    """:class:`Volumes` of ``candidate`` from one worker's ``counts`` at ``workers``.

    ``cache`` (partitioned): ``rows`` cached and ``hit_rate`` of remote rows.
    """
    width = shape.widths[0]
    share = 1.0 / workers if candidate.hybrid else 1.0
    flops = layer_flops(counts, list(shape.widths), share)
    if candidate.hybrid:  # this worker's columns of every worker's first layer
        first = layer_flops(
            BatchCounts(counts.seeds, counts.n_src, counts.n_dst, counts.edges, counts.hops[:1], 0),
            list(shape.widths[:2]),
            share,
        )
        flops += (workers - 1) * first
        gathered_rows = workers * counts.n_src
        gathered_bytes = gathered_rows * math.ceil(width / workers) * FLOAT_BYTES
        replicated = list(shape.replicated_bytes)
    else:
        gathered_rows = counts.n_src
        gathered_bytes = counts.n_src * width * FLOAT_BYTES
        replicated = list(shape.parameter_bytes)
    buckets = ddp_buckets(replicated)
    volumes = Volumes(
        name=candidate.name,
        workers=workers,
        steps=steps,
        counts=counts,
        flops=flops,
        gathered_rows=gathered_rows,
        gathered_bytes=gathered_bytes,
        gradient_bytes=float(sum(replicated)),
        gradient_buckets=buckets,
        memory=_memory(candidate, shape, counts, workers, graph, cache, on_gpu),
    )
    if candidate.hybrid:
        volumes.structure_bytes = (workers - 1) * counts.structure_bytes
        hidden = shape.widths[1]
        volumes.partial_bytes = 2 * (workers - 1) * counts.n_dst * hidden * FLOAT_BYTES
        if candidate.partitioned:  # the other parts' rows of this worker's columns, once
            volumes.setup_bytes = graph.part_nodes * width * (workers - 1) / workers * FLOAT_BYTES
    elif candidate.partitioned:
        hit = (cache or {}).get("hit_rate", 0.0)
        volumes.remote_rows = counts.remote_rows
        volumes.cache_hit_rate = hit
        # Ids asked (int64), rows and labels (int64) back.
        volumes.fetched_bytes = counts.remote_rows * (1 - hit) * (width * FLOAT_BYTES + 16)
    return volumes


def _memory(
    candidate: Candidate,
    shape: ModelShape,
    counts: BatchCounts,
    workers: int,
    graph: GraphSize,
    cache: dict | None,
    on_gpu: bool,
) -> Memory:
    """Bytes a worker of ``candidate`` holds (labels int64 with the structure)."""
    width = shape.widths[0]
    columns = math.ceil(width / workers) if candidate.hybrid else width
    if candidate.partitioned:
        structure = 8 * (graph.part_nodes + 1) + (graph.index_bytes + 8) * graph.part_edges
        labels = 8 * graph.part_nodes
        rows = graph.nodes if candidate.hybrid else graph.part_nodes
    else:
        structure = 8 * (graph.nodes + 1) + graph.index_bytes * graph.edges
        labels = 8 * graph.nodes
        rows = graph.nodes
    memory = Memory(features=rows * columns * FLOAT_BYTES, graph=structure + labels)
    if candidate.partitioned and not candidate.hybrid and cache:
        memory.cache = int(cache.get("rows", 0) * (width * FLOAT_BYTES + 8))
    if on_gpu:
        parameters = sum(shape.parameter_bytes)
        batch = counts.n_src * columns * FLOAT_BYTES * (workers if candidate.hybrid else 1)
        activations = sum(n * w for (n, _), w in zip(counts.hops, shape.widths[1:], strict=True))
        # Weights, gradients and Adam's two moments; two batches in flight; activations and
        # their gradients.
        memory.device = int(4 * parameters + 2 * batch + 2 * FLOAT_BYTES * activations)
    return memory
