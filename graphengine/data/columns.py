"""A feature table split by columns: each of ``N`` workers holds a contiguous range of the
columns of every row (P3's split), so that the workers hold one copy of the table between
them. The counterpart of splitting by rows (:mod:`graphengine.data.partition`)."""

from __future__ import annotations

import numpy as np
import torch

from graphengine import ops
from graphengine.data.arrays import memmap_source

# Rows copied per read while a slice is built: bounds the transient memory to one chunk.
_CHUNK_BYTES = 64 << 20


def column_ranges(num_columns: int, num_parts: int) -> list[tuple[int, int]]:
    """``num_parts`` contiguous ``[start, stop)`` ranges covering ``[0, num_columns)``, the
    first ``num_columns % num_parts`` one column wider than the rest.

    Raises ``ValueError`` when there are fewer columns than parts (a part would hold none).
    """
    if isinstance(num_parts, bool) or not isinstance(num_parts, int) or num_parts < 1:
        raise ValueError(f"'num_parts' must be an int >= 1 (got {num_parts!r})")
    if num_columns < num_parts:
        raise ValueError(
            f"a table of {num_columns} columns cannot be split across {num_parts} workers "
            "(each needs at least one column)"
        )
    width, wider = divmod(num_columns, num_parts)
    bounds = np.cumsum([0] + [width + (part < wider) for part in range(num_parts)])
    return [(int(bounds[p]), int(bounds[p + 1])) for p in range(num_parts)]


class FeatureColumns:
    """Columns ``[start, stop)`` of every row of a ``[num_rows, num_columns]`` table, in this
    process's memory (``stop - start`` columns per row, contiguous).

    Attributes:
        table: float ``[num_rows, stop - start]``, a contiguous copy.
        start, stop: the column range.
        num_columns: the whole table's width.
    """

    def __init__(self, table: torch.Tensor, start: int, stop: int, num_columns: int):
        if table.dim() != 2 or table.shape[1] != stop - start:
            raise ValueError(
                f"'table' must be [num_rows, {stop - start}] for columns [{start}, {stop}) "
                f"(got {list(table.shape)})"
            )
        self.table = table.contiguous()
        self.start = start
        self.stop = stop
        self.num_columns = num_columns

    @classmethod
    def from_table(
        cls, x, start: int, stop: int, chunk_bytes: int = _CHUNK_BYTES
    ) -> FeatureColumns:
        """Copy columns ``[start, stop)`` of ``x`` (a numpy array, a memory-mapped ``.npy``
        table or a tensor, ``[num_rows, num_columns]``), reading ``chunk_bytes`` of whole rows
        at a time (64 MiB): a memory-mapped table is read from its file chunk by chunk,
        without mapping it, so the process never holds more than its slice and one chunk.

        Raises ``ValueError`` for a table that is not 2-D or a range outside its columns.
        """
        if x.ndim != 2:
            raise ValueError(f"the feature table must be 2-D (got shape {list(x.shape)})")
        num_rows, num_columns = int(x.shape[0]), int(x.shape[1])
        if not 0 <= start < stop <= num_columns:
            raise ValueError(
                f"columns [{start}, {stop}) are not a non-empty range of the table's "
                f"{num_columns} columns"
            )
        dtype = np.dtype(str(x.dtype).replace("torch.", ""))
        out = np.empty((num_rows, stop - start), dtype=dtype)
        chunk = max(1, chunk_bytes // max(1, num_columns * dtype.itemsize))
        for first, rows in row_chunks(x, chunk):
            out[first : first + len(rows)] = rows[:, start:stop]
        return cls(torch.from_numpy(out), start, stop, num_columns)

    @property
    def num_rows(self) -> int:
        return int(self.table.shape[0])

    @property
    def nbytes(self) -> int:
        """Bytes this worker holds: ``num_rows * (stop - start) * itemsize``."""
        return self.table.numel() * self.table.element_size()

    def gather(self, ids: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """This slice of rows ``ids`` (int32 or int64 ``[n]``): ``[n, stop - start]``.
        Raises ``IndexError`` naming the first id outside ``[0, num_rows)``."""
        return ops.gather_rows(self.table, ids, out)

    def __repr__(self) -> str:
        return (
            f"FeatureColumns(rows={self.num_rows}, columns=[{self.start}, {self.stop}) of "
            f"{self.num_columns}, {self.nbytes / 2**20:.1f} MiB)"
        )


def row_chunks(x, rows_per_chunk: int):
    """``(first_row, rows)`` of ``x`` in chunks of ``rows_per_chunk`` rows. A C-contiguous
    memory map is read from its file with plain reads into one reused buffer (each chunk
    is valid until the next), so its pages are never mapped into this process."""
    num_rows = int(x.shape[0])
    source = memmap_source(x) if isinstance(x, np.memmap) else None
    if source is None:
        table = x.numpy() if isinstance(x, torch.Tensor) else np.asarray(x)
        for first in range(0, num_rows, rows_per_chunk):
            yield first, table[first : first + rows_per_chunk]
        return
    filename, dtype, shape, offset, _ = source
    buffer = np.empty((min(rows_per_chunk, num_rows), *shape[1:]), dtype=dtype)
    row_bytes = buffer[:1].nbytes
    with open(filename, "rb") as f:
        f.seek(offset)
        for first in range(0, num_rows, rows_per_chunk):
            rows = buffer[: min(rows_per_chunk, num_rows - first)]
            if f.readinto(memoryview(rows).cast("B")) != rows.nbytes:
                raise ValueError(
                    f"'{filename}' ends before row {first + len(rows)} of {num_rows} "
                    f"({row_bytes} bytes a row)"
                )
            yield first, rows
