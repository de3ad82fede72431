"""Whether a store's features are read from disk, and how much memory their row cache gets.

A store whose memory-mapped arrays fit well within the memory a process may use is read
through its memory maps: the page cache holds it after the first epoch and a gather is a
memory copy. A larger one is read from disk (:class:`~graphengine.data.disk_table.DiskTable`):
the page cache would otherwise hold the feature rows and the graph's arrays in the same
memory the process needs, evicting with no knowledge of which rows batches come back to. The
graph's arrays stay memory-mapped (the sampler walks them in place) and are left the page
cache they need; the row cache gets a share of what remains after the process's own memory,
the rest is kept for training's buffers (batches in flight, activations, the model). Several
worker processes on one machine (``LOCAL_WORLD_SIZE`` under torchrun) share the page cache of
the graph's arrays but each hold a cache of their own, so each gets its share.
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass

from graphengine.data.disk_io import proc_field
from graphengine.data.memory import memory_limit

#: A store whose memory-mapped arrays take at most this share of the memory limit is read
#: through its memory maps (the kernel's page cache holds it beside the process).
FITS_SHARE = 0.5
#: The share of the memory left (after the process and the graph's arrays) kept for
#: training's own buffers; the row cache gets the rest.
TRAINING_SHARE = 0.5
#: Never less than this kept for each worker's training buffers.
MIN_TRAINING_BYTES = 1 << 30


@dataclass(frozen=True)
class FeaturePlan:
    """How a store's features are read.

    Attributes:
        from_disk: read rows from disk through a row cache (else through the memory map).
        cache_bytes: the row cache's budget in bytes (0 when ``from_disk`` is false).
        reason: why, in words, for the log.
    """

    from_disk: bool
    cache_bytes: int
    reason: str


def plan_features(
    feature_bytes: int,
    graph_bytes: int,
    limit: int | None,
    in_use: int,
    workers: int = 1,
) -> FeaturePlan:
    """How to read ``feature_bytes`` of memory-mapped features beside ``graph_bytes`` of
    memory-mapped graph arrays, for ``workers`` processes on one machine that may use
    ``limit`` bytes together (``None``: unknown), each using ``in_use`` now (its own resident
    memory).

    From disk when the mapped arrays take more than :data:`FITS_SHARE` of ``limit``; each
    worker's cache budget is then its share of what is left after the workers' ``in_use``
    and the graph's arrays, less the share kept for training (:data:`TRAINING_SHARE`, at
    least :data:`MIN_TRAINING_BYTES` a worker), never below 0.
    """
    gib = 1 << 30
    mapped = feature_bytes + graph_bytes
    if feature_bytes == 0:
        return FeaturePlan(False, 0, "the features are in memory, not memory-mapped")
    if limit is None:
        return FeaturePlan(False, 0, "this process's memory limit is unknown")
    sizes = (
        f"the store's memory-mapped arrays take {mapped / gib:.2f} GiB of the "
        f"{limit / gib:.2f} GiB this process may use"
    )
    if mapped <= FITS_SHARE * limit:
        return FeaturePlan(False, 0, f"{sizes} (at most {FITS_SHARE:.0%}): memory-mapped")
    cache = cache_budget(feature_bytes, graph_bytes, limit, in_use, workers)
    return FeaturePlan(
        True,
        cache,
        f"{sizes} (more than {FITS_SHARE:.0%}): rows read from disk through a "
        f"{cache / gib:.2f} GiB row cache"
        + (f" in each of {workers} workers" if workers > 1 else ""),
    )


def cache_budget(
    feature_bytes: int, graph_bytes: int, limit: int | None, in_use: int, workers: int = 1
) -> int:
    """Each worker's row cache budget in bytes, as :func:`plan_features` sizes it for rows
    read from disk (0 for an unknown ``limit``), at most ``feature_bytes``."""
    if limit is None:
        return 0
    left = max(0, limit - workers * in_use - graph_bytes)
    kept = max(workers * MIN_TRAINING_BYTES, int(TRAINING_SHARE * left))
    return min(max(0, left - kept) // workers, feature_bytes)


def plan_for_process(feature_bytes: int, graph_bytes: int) -> FeaturePlan:
    """:func:`plan_features` for this process: its memory limit
    (:func:`~graphengine.data.memory.memory_limit`), its resident memory now, and the
    workers on this machine (:func:`local_workers`)."""
    return plan_features(
        feature_bytes, graph_bytes, memory_limit(), resident_bytes(), local_workers()
    )


def cache_budget_for_process(feature_bytes: int, graph_bytes: int) -> int:
    """:func:`cache_budget` for this process, as :func:`plan_for_process` sees it."""
    return cache_budget(
        feature_bytes, graph_bytes, memory_limit(), resident_bytes(), local_workers()
    )


def local_workers() -> int:
    """The worker processes on this machine: torchrun's ``LOCAL_WORLD_SIZE`` (unset or empty:
    1). Raises ``ValueError`` naming the variable and its value when it is set to anything but
    a positive integer: each worker's share of memory is divided by it, so a wrong count
    would size every cache wrong."""
    value = os.environ.get("LOCAL_WORLD_SIZE", "")
    text = value.strip()
    if not text:
        return 1
    if not text.isdecimal() or int(text) < 1:
        raise ValueError(
            "$LOCAL_WORLD_SIZE must be a positive integer, the worker processes on this "
            f"machine (got {value!r})"
        )
    return int(text)


def resident_bytes() -> int:
    """This process's own resident memory now (``RssAnon``: not the pages of files it maps,
    which the page cache may drop), else its peak so far."""
    kib = proc_field("/proc/self/status", "RssAnon")
    if kib is None:
        kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kib * 1024
