"""The dataset ``graphengine train`` opens: generated once per machine, the workers sharing
its memory-mapped files."""

from __future__ import annotations

import argparse
import logging
import os

import torch

from graphengine.data.disk_io import is_mapped
from graphengine.data.memory import memory_limit
from graphengine.datasets.dataset import choose_feature_reads

log = logging.getLogger("graphengine")


def homogeneous_dataset(args: argparse.Namespace, world_size: int):
    """``--dataset`` (generated once per machine), its features scaled with
    ``--normalize-features``."""
    dataset = load_once_per_machine(args.dataset, args.root, world_size, args.features)
    access = args.access
    if access is None:
        access, why = default_access(dataset, memory_limit())
        log.info("reading the store with --access %s: %s", access, why)
    advised = dataset.advise(access)
    if advised:
        log.info("advised %s access to %s", access, ", ".join(advised))
    choose_feature_reads(dataset, args.feature_reads, args.cache_policy)
    return dataset.normalize_features() if args.normalize_features else dataset


def default_access(dataset, limit: int | None) -> tuple[str, str]:
    """How to read ``dataset``'s memory-mapped arrays when ``--access`` is not given, and why:
    ``"random"`` (no read-ahead) when they take more than half of ``limit`` (the bytes this
    process may use, :func:`graphengine.data.memory.memory_limit`), since read-ahead then
    fills memory with pages no batch reads and evicts the ones it does (an epoch that did not
    end in 30 minutes in a cgroup of 40% of the store), else ``"normal"`` (the kernel's)."""
    arrays = (dataset.x, dataset.graph.indices, dataset.graph.indptr)
    mapped = sum(int(a.nbytes) for a in arrays if is_mapped(a))
    if mapped == 0:
        return "normal", "the store is in memory, not memory-mapped"
    if limit is None:
        return "normal", "this process's memory limit is unknown"
    gib = 1 << 30
    sizes = f"its memory-mapped arrays take {mapped / gib:.2f} GiB of the {limit / gib:.2f} GiB"
    if 2 * mapped > limit:
        return "random", f"{sizes} this process may use (more than half; --access to choose)"
    return "normal", f"{sizes} this process may use (at most half; --access to choose)"


def load_once_per_machine(
    name: str, root: str | None, world_size: int, num_features: int | None = None
):
    """Local rank 0 loads (and generates, for a synthetic dataset) first; the other workers
    then open the same memory-mapped files, so the machine holds one copy."""
    from graphengine.datasets import load_dataset

    if world_size == 1:
        return load_dataset(name, root=root, num_features=num_features)
    first = int(os.environ.get("LOCAL_RANK", 0)) == 0
    dataset = load_dataset(name, root=root, num_features=num_features) if first else None
    torch.distributed.barrier()
    return dataset if first else load_dataset(name, root=root, num_features=num_features)
