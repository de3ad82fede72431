"""The dataset ``graphengine train`` opens: generated once per machine, the workers sharing
its memory-mapped files."""

from __future__ import annotations

import argparse
import logging
import os

import torch

log = logging.getLogger("graphengine")


def homogeneous_dataset(args: argparse.Namespace, world_size: int):
    """``--dataset`` (generated once per machine), its features scaled with
    ``--normalize-features``."""
    dataset = load_once_per_machine(args.dataset, args.root, world_size, args.features)
    if args.access is not None:
        log.info("advised %s access to %s", args.access, ", ".join(dataset.advise(args.access)))
    return dataset.normalize_features() if args.normalize_features else dataset


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
