"""Partitioned graphs: K parts, each owning one contiguous range of renumbered node ids.

:func:`partition_dataset` writes a dataset as parts (METIS or random assignment);
:func:`load_partition` opens the partition book (bounds, id maps); :func:`open_part` opens one
part (its CSC over global new ids, edge ids, features, labels and split), memory-mapped.
"""

from graphengine.data.partition.book import PartitionBook
from graphengine.data.partition.partitioner import METHODS, assign_parts, renumber
from graphengine.data.partition.store import (
    Part,
    PartitionSource,
    load_partition,
    open_part,
    partition_dataset,
)

__all__ = [
    "METHODS",
    "Part",
    "PartitionBook",
    "PartitionSource",
    "assign_parts",
    "load_partition",
    "open_part",
    "partition_dataset",
    "renumber",
]
