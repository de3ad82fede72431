"""One worker's view of a partitioned graph: its part, its exchanges with the other parts'
workers and the features of any node."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from graphengine.data.partition import Part, open_part
from graphengine.datasets.dataset import check_labels
from graphengine.distributed.exchange import Exchange, new_exchange
from graphengine.distributed.features import DistFeatures

SPLITS = ("train", "val", "test")


class DistData:
    """This worker's part of a partition, and what it needs to reach the others.

    Node ids are the partition's new ids; ``book.to_orig`` / ``book.to_new`` map them. The
    splits are this part's own nodes: together the workers cover each split once.

    Opening is a collective (it creates two process groups): every worker of the joined
    group opens the same partition, worker ``r`` part ``r``.

    Attributes:
        part: this worker's part (memory-mapped).
        sampling: the exchange the sampler uses; ``fetching``: the one features use (two
            groups, so that a batch's features can be fetched while the next is sampled).
        features: rows of any node, with this worker's cache of remote rows.
    """

    def __init__(self, part: Part, sampling: Exchange, fetching: Exchange):
        self.part = part
        self.sampling = sampling
        self.fetching = fetching
        self.features = DistFeatures(part, fetching)

    @classmethod
    def open(cls, path: str | Path, verify: bool = True, device: torch.device | None = None):
        """Open part ``rank`` of the partition at ``path`` in the joined process group.

        Args:
            path: the partition's directory (``graphengine partition``).
            verify: check this part's files against their checksums.
            device: where exchanges go through the backend (a CUDA device with NCCL).

        Raises:
            RuntimeError: no joined process group.
            ValueError: the partition has another number of parts than there are workers,
                or this part holds a label outside ``[0, num_classes)`` of the manifest
                (found here, not as an index error inside the loss).
        """
        if not (dist.is_available() and dist.is_initialized()):
            raise RuntimeError("a partitioned graph needs a joined torch.distributed group")
        rank, world_size = dist.get_rank(), dist.get_world_size()
        part = open_part(path, rank, verify=verify)
        if part.book.num_parts != world_size:
            raise ValueError(
                f"partition '{path}' has {part.book.num_parts} parts, but {world_size} workers "
                f"joined: start one worker per part (e.g. --nproc {part.book.num_parts})"
            )
        splits = {name: getattr(part, f"{name}_idx") - part.start for name in SPLITS}
        check_labels(
            f"{path} (part {rank})", part.y, int(part.book.manifest["num_classes"]), splits
        )
        return cls(part, new_exchange(device), new_exchange(device))

    @property
    def book(self):
        return self.part.book

    @property
    def manifest(self) -> dict:
        return self.part.book.manifest

    @property
    def name(self) -> str:
        return str(self.manifest.get("dataset", "partition"))

    @property
    def num_nodes(self) -> int:
        """Nodes in the whole graph."""
        return self.book.num_nodes

    @property
    def num_features(self) -> int:
        return int(self.part.x.shape[1])

    @property
    def num_classes(self) -> int:
        return int(self.manifest["num_classes"])

    @property
    def train_idx(self) -> np.ndarray:
        return self.part.train_idx

    @property
    def val_idx(self) -> np.ndarray:
        return self.part.val_idx

    @property
    def test_idx(self) -> np.ndarray:
        return self.part.test_idx

    def split(self, name: str) -> np.ndarray:
        """This part's nodes of split ``name`` (global new ids, ascending)."""
        if name not in SPLITS:
            raise ValueError(f"'split' must be one of {SPLITS} (got {name!r})")
        return getattr(self.part, f"{name}_idx")

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.name!r}, part {self.part.part} of "
            f"{self.book.num_parts}: {self.part.num_nodes} of {self.num_nodes} nodes, "
            f"{self.part.num_edges} in-edges, {len(self.train_idx)} training nodes)"
        )
