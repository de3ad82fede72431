"""Reading stores from disk: what a process read, and how its memory maps are read ahead.

A memory-mapped store larger than memory is read by page faults: every row a batch gathers
and every neighbor list the sampler walks that is not in the page cache costs a major fault
and a read from disk. :class:`IoCounters` measures that (faults from ``getrusage``, bytes from
``/proc/self/io``), and :func:`advise` tells the kernel how a mapping will be read: Linux reads
ahead 128 KiB around each faulting page by default, which for a random 512-byte feature row
reads hundreds of rows that the batch does not need (``"random"`` turns read-ahead off).
"""

from __future__ import annotations

import mmap
import resource
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ACCESS = ("normal", "random", "sequential")
_ADVICE = {
    "normal": getattr(mmap, "MADV_NORMAL", None),
    "random": getattr(mmap, "MADV_RANDOM", None),
    "sequential": getattr(mmap, "MADV_SEQUENTIAL", None),
}


@dataclass(frozen=True)
class IoCounters:
    """This process's page faults so far, and the bytes it caused to be read from storage
    (``None`` where ``/proc/self/io`` cannot be read: not Linux, or no permission)."""

    major_faults: int
    minor_faults: int
    read_bytes: int | None

    @classmethod
    def now(cls) -> IoCounters:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return cls(usage.ru_majflt, usage.ru_minflt, _proc_read_bytes())

    def since(self, earlier: IoCounters) -> dict:
        """``major_faults``, ``minor_faults`` and ``read_bytes`` between ``earlier`` and this."""
        read = None
        if self.read_bytes is not None and earlier.read_bytes is not None:
            read = self.read_bytes - earlier.read_bytes
        return {
            "major_faults": self.major_faults - earlier.major_faults,
            "minor_faults": self.minor_faults - earlier.minor_faults,
            "read_bytes": read,
        }


def _proc_read_bytes() -> int | None:
    return proc_field("/proc/self/io", "read_bytes")


def proc_field(path: str, name: str) -> int | None:
    """The number after ``name:`` in the ``/proc`` file at ``path``, or ``None`` where the
    file or the field is missing."""
    try:
        text = Path(path).read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(f"{name}:"):
            return int(line.split()[1])
    return None


def advise(array, access: str) -> bool:
    """Tell the kernel how the memory map under ``array`` (an ``np.memmap`` or a view of one)
    will be read: ``"normal"`` (read-ahead), ``"random"`` (none) or ``"sequential"``. The whole
    mapping is advised. Returns ``False`` for an array that is not memory-mapped or where the
    platform lacks ``madvise``.

    Raises ``ValueError`` for another ``access``.
    """
    if access not in ACCESS:
        raise ValueError(f"'access' must be one of {ACCESS} (got {access!r})")
    mapping = _mapping(array)
    if mapping is None or _ADVICE[access] is None or not hasattr(mapping, "madvise"):
        return False
    try:
        mapping.madvise(_ADVICE[access])
    except OSError:  # a hint the kernel refused
        return False
    return True


def is_mapped(array) -> bool:
    """Whether ``array`` (an array or a view of one) reads a memory-mapped file."""
    return _mapping(array) is not None


def _mapping(array) -> mmap.mmap | None:
    while isinstance(array, np.ndarray):
        if isinstance(getattr(array, "_mmap", None), mmap.mmap):
            return array._mmap
        array = array.base
    return array if isinstance(array, mmap.mmap) else None
