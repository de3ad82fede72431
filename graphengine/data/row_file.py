"""Rows of a 2-D ``.npy`` table read from disk with many reads in flight: :class:`RowFile`.

A memory map of a store larger than memory is read by page faults, and a faulting thread
waits for its one 4 KiB read: a disk that answers tens of thousands of reads a second with
many queued answers a few thousand to one thread. :class:`RowFile` reads a batch's rows with
the extension's ``read_rows`` (:mod:`graphengine.ops.read_rows`), up to ``queue_depth``
reads in flight, through io_uring or a pool of ``pread`` threads, with ``O_DIRECT`` where the
filesystem allows it (the rows then bypass the page cache: a host row cache above decides
what stays in memory).
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import threading
from pathlib import Path

import numpy as np
import torch
from numpy.lib import format as npy_format

from graphengine.data.files import check_regular_file
from graphengine.ops.backend import extension_usable, require_extension

log = logging.getLogger("graphengine")

#: What ``engine=`` takes; ``"auto"`` tries :data:`AUTO_ORDER` in turn, then ``"python"``.
ENGINES = ("auto", "io_uring", "pread", "python")
#: The engine ``engine="auto"`` tries first (the faster one on the machine measured with
#: ``graphengine bench disk``), then the other one.
AUTO_ORDER = ("pread", "io_uring")
#: What ``direct=`` takes: ``O_DIRECT`` reads, buffered ones, or O_DIRECT where it works.
DIRECT_MODES = (True, False, "auto")
#: Overrides ``engine="auto"`` for the process (one of :data:`ENGINES`).
ENGINE_ENV = "GRAPHENGINE_IO_ENGINE"
DEFAULT_DIRECT_ALIGN = 4096
_STATX_DIOALIGN = 0x2000
_logged: set[tuple] = set()
_logged_lock = threading.Lock()


class RowFile:
    """The rows of a 2-D C-order ``.npy`` file at ``path``, read by id.

    ``engine``: one of :data:`ENGINES` (``"auto"``: ``$GRAPHENGINE_IO_ENGINE`` when set, else
    the first of :data:`AUTO_ORDER` that runs here (io_uring needs the kernel to allow a ring),
    else ``"python"`` (one
    ``os.pread`` per row) where the extension is not built or the ops backend is ``"torch"``).
    ``direct``: ``True``, ``False`` or ``"auto"`` (``O_DIRECT`` where the filesystem accepts it,
    else buffered reads through the page cache). ``queue_depth``: reads in flight per call.

    Attributes: ``path``, ``dtype`` (``np.dtype``), ``shape`` (``(num_rows, num_cols)``),
    ``row_bytes``, ``offset`` (the header's size), ``engine`` (``"io_uring"``, ``"pread"`` or
    ``"python"``), ``direct`` (bool) and ``reason`` (why that engine and mode; logged once at
    INFO). :meth:`read` may be called from several threads at once. A ``RowFile`` pickles as
    its path and options: the copy opens its own descriptor.

    Raises ``FileNotFoundError`` for a missing file, ``ValueError`` naming the file for one
    that is not a 2-D C-order ``.npy`` of a plain dtype or is shorter than its header says,
    ``ValueError`` for bad options, and ``OSError`` where a forced engine or mode cannot run.
    """

    def __init__(self, path, *, engine="auto", direct="auto", queue_depth=64):
        check_read_options(engine, direct, "RowFile")
        if isinstance(queue_depth, bool) or not isinstance(queue_depth, int):
            raise TypeError(f"RowFile: 'queue_depth' must be an int (got {queue_depth!r})")
        if not 1 <= queue_depth <= 4096:
            raise ValueError(f"RowFile: 'queue_depth' must be in [1, 4096] (got {queue_depth})")
        self.path = Path(path)
        self._options = (engine, direct, queue_depth)
        self.queue_depth = queue_depth
        self.dtype, self.shape, self.offset = _read_header(self.path)
        self._torch_dtype = _torch_dtype(self.dtype, self.path)
        self.row_bytes = self.shape[1] * self.dtype.itemsize
        self._lock = threading.Lock()
        self._totals = {"rows": 0, "reads": 0, "bytes": 0}
        self._fd = -1
        self.engine, self.direct, self.reason = self._open(engine, direct)
        key = (str(self.path), self.engine, self.direct, self.reason)
        with _logged_lock:
            if key not in _logged:
                _logged.add(key)
                log.info("reading rows of '%s': %s", self.path, self.reason)

    @property
    def num_rows(self) -> int:
        return self.shape[0]

    def read(self, ids: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """Rows ``ids`` (int32/int64 ``[n]``, CPU; any order, repeats allowed) -> ``[n,
        num_cols]`` tensor of the file's dtype (written into ``out`` when given: contiguous,
        CPU, that shape and dtype). Raises ``IndexError`` naming an id out of range and its
        position before reading, ``OSError`` naming the file, the row and its offset where
        the file ends early (truncated or replaced) or a read fails."""
        if self._fd < 0:
            raise ValueError(f"RowFile '{self.path}' is closed")
        ids = _checked_ids(ids, self.num_rows)
        out = self._checked_out(out, ids.numel())
        if ids.numel() == 0:
            return out
        if self.engine == "python":
            counts = self._read_python(ids, out)
        else:
            from graphengine.ops.read_rows import read_rows

            try:
                counts = read_rows(
                    self._fd,
                    ids,
                    out,
                    offset=self.offset,
                    row_bytes=self.row_bytes,
                    num_rows=self.num_rows,
                    engine=self.engine,
                    queue_depth=self.queue_depth,
                    align=self._align,
                )
            except RuntimeError as error:
                raise OSError(f"'{self.path}': {_first_line(error)}") from None
        with self._lock:
            self._totals["rows"] += ids.numel()
            self._totals["reads"] += counts["reads"]
            self._totals["bytes"] += counts["bytes"]
        return out

    def counters(self) -> dict:
        """Cumulative ``rows`` returned, ``reads`` (requests issued) and ``bytes`` read from
        the file since opening."""
        with self._lock:
            return dict(self._totals)

    def close(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)

    def __enter__(self) -> RowFile:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_fd", -1) >= 0:
            self.close()

    def __reduce__(self):
        engine, direct, queue_depth = self._options
        return _reopen, (str(self.path), engine, direct, queue_depth)

    def __repr__(self) -> str:
        return (
            f"RowFile('{self.path}', {self.dtype}, shape={self.shape}, engine={self.engine!r}, "
            f"direct={self.direct})"
        )

    # -- opening ------------------------------------------------------------------------

    def _open(self, engine: str, direct) -> tuple[str, bool, str]:
        requested = engine
        if engine == "auto":
            engine = os.environ.get(ENGINE_ENV, "auto")
            if engine not in ENGINES:
                raise ValueError(f"${ENGINE_ENV} must be one of {ENGINES} (got {engine!r})")
        if engine == "python" or (engine == "auto" and not extension_usable()):
            why = "asked for" if engine == "python" else "the extension is unusable"
            self._fd, self._align = os.open(self.path, os.O_RDONLY), 0
            return "python", False, f"engine python ({why}: one os.pread per row), buffered"
        require_extension(f"RowFile engine={engine!r}")
        engine, engine_why = self._pick_engine(engine, requested)
        self.engine = engine  # the O_DIRECT trial read runs through it
        mode_why = self._open_mode(engine, direct)
        return engine, self._align > 0, f"engine {engine} ({engine_why}), {mode_why}"

    def _pick_engine(self, engine: str, requested: str) -> tuple[str, str]:
        from graphengine.ops.read_rows import io_uring_probe

        if engine == "pread":
            return "pread", "asked for" if requested == "pread" else f"${ENGINE_ENV}"
        refusal = io_uring_probe()
        if engine == "io_uring":
            if refusal:
                raise OSError(f"RowFile '{self.path}': engine='io_uring' cannot run: {refusal}")
            return "io_uring", "asked for" if requested == "io_uring" else f"${ENGINE_ENV}"
        if refusal and AUTO_ORDER[0] == "io_uring":
            return "pread", f"io_uring refused: {refusal}"
        if AUTO_ORDER[0] == "pread" or refusal:
            return "pread", "the faster engine here"
        return "io_uring", "the faster engine here"

    def _open_mode(self, engine: str, direct) -> str:
        """Open the descriptor, O_DIRECT or buffered as ``direct`` asks; the mode's reason."""
        self._align = 0
        if direct is False:
            self._fd = os.open(self.path, os.O_RDONLY)
            return "buffered (asked for)"
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_DIRECT)
        except OSError as error:
            if direct is True or error.errno != errno.EINVAL:
                raise OSError(
                    error.errno,
                    f"RowFile: cannot open '{self.path}' with O_DIRECT: {error.strerror}",
                ) from None
            self._fd = os.open(self.path, os.O_RDONLY)
            return "buffered (the filesystem refuses O_DIRECT)"
        self._fd, self._align = fd, direct_alignment(fd)
        # Some filesystems accept O_DIRECT at open and refuse the reads: try one.
        try:
            if self.num_rows:
                self.read(torch.zeros(1, dtype=torch.int64))
        except OSError as error:
            os.close(fd)
            self._fd, self._align = -1, 0
            if direct is True:
                raise
            self._fd = os.open(self.path, os.O_RDONLY)
            return f"buffered (an O_DIRECT read failed: {error})"
        finally:
            self._totals = {"rows": 0, "reads": 0, "bytes": 0}
        asked = "asked for" if direct is True else "accepted"
        return f"O_DIRECT ({asked}, {self._align}-byte aligned)"

    # -- reading ------------------------------------------------------------------------

    def _checked_out(self, out: torch.Tensor | None, n: int) -> torch.Tensor:
        shape = (n, self.shape[1])
        if out is None:
            return torch.empty(shape, dtype=self._torch_dtype)
        if not isinstance(out, torch.Tensor):
            raise TypeError(
                f"RowFile.read: 'out' must be a torch tensor (got {type(out).__name__})"
            )
        if (
            tuple(out.shape) != shape
            or out.dtype != self._torch_dtype
            or out.device.type != "cpu"
            or not out.is_contiguous()
        ):
            raise ValueError(
                f"RowFile.read: 'out' must be a contiguous CPU {self._torch_dtype} tensor of "
                f"shape {shape} (got {out.dtype} {tuple(out.shape)} on {out.device}, "
                f"contiguous={out.is_contiguous()})"
            )
        return out

    def _read_python(self, ids: torch.Tensor, out: torch.Tensor) -> dict:
        """One ``os.pread`` per distinct row: the reference reader, without the extension."""
        out_bytes = out.view(torch.uint8).view(ids.numel(), self.row_bytes).numpy()
        distinct, inverse = np.unique(ids.numpy(), return_inverse=True)
        rows = np.empty((len(distinct), self.row_bytes), dtype=np.uint8)
        nbytes = 0
        for k, row in enumerate(distinct.tolist()):
            start = self.offset + row * self.row_bytes
            try:
                data = os.pread(self._fd, self.row_bytes, start)
            except OSError as err:
                # Worded as the C++ engines word a failed read; errno kept for callers.
                raise OSError(
                    err.errno,
                    f"'{self.path}': reading row {row} (byte offset {start} of the file) "
                    f"failed: {err.strerror}",
                ) from err
            nbytes += len(data)
            if len(data) != self.row_bytes:
                raise OSError(
                    f"'{self.path}': row {row} at byte offset {start} of the file came back "
                    f"short: {len(data)} of its {self.row_bytes} bytes (the file ends early: "
                    "truncated or replaced while open?)"
                )
            rows[k] = np.frombuffer(data, dtype=np.uint8)
        out_bytes[:] = rows[inverse.reshape(-1)]
        return {"reads": len(distinct), "bytes": nbytes}


def check_read_options(engine, direct, caller: str) -> None:
    """Raise ``ValueError`` naming ``caller`` and the option unless ``engine`` is one of
    :data:`ENGINES` and ``direct`` one of :data:`DIRECT_MODES`, so that callers that open a
    :class:`RowFile` later can refuse a bad option when it is given."""
    if not isinstance(engine, str) or engine not in ENGINES:
        raise ValueError(f"{caller}: 'engine' must be one of {ENGINES} (got {engine!r})")
    # Not `in DIRECT_MODES`: 1 and 0 equal True and False, and only the bools are meant.
    if not isinstance(direct, bool) and direct != "auto":
        raise ValueError(f"{caller}: 'direct' must be one of {DIRECT_MODES} (got {direct!r})")


def _reopen(path: str, engine, direct, queue_depth: int) -> RowFile:
    return RowFile(path, engine=engine, direct=direct, queue_depth=queue_depth)


def _read_header(path: Path) -> tuple[np.dtype, tuple[int, int], int]:
    """``(dtype, (num_rows, num_cols), header bytes)`` of the ``.npy`` file at ``path``."""
    check_regular_file(path, "row file")
    with open(path, "rb") as file:
        try:
            version = npy_format.read_magic(file)
            if version == (1, 0):
                shape, fortran, dtype = npy_format.read_array_header_1_0(file)
            elif version == (2, 0):
                shape, fortran, dtype = npy_format.read_array_header_2_0(file)
            else:
                raise ValueError(f"unsupported .npy version {version}")
        except (ValueError, OSError, EOFError, SyntaxError) as error:
            raise ValueError(f"row file '{path}' is not a readable .npy file: {error}") from None
        offset = file.tell()
        size = os.fstat(file.fileno()).st_size
    if len(shape) != 2:
        raise ValueError(f"row file '{path}' holds a {len(shape)}-D array {shape}, expected 2-D")
    if fortran and shape[0] > 1 and shape[1] > 1:
        raise ValueError(f"row file '{path}' is in Fortran order, expected C order (rows)")
    if dtype.hasobject or dtype.itemsize == 0:
        raise ValueError(f"row file '{path}' holds dtype {dtype}, expected a plain numeric one")
    if shape[1] == 0:
        raise ValueError(f"row file '{path}' has 0 columns {shape}, expected at least one")
    expected = offset + shape[0] * shape[1] * dtype.itemsize
    if size < expected:
        raise ValueError(
            f"row file '{path}' is {size} bytes, shorter than the {expected} its header "
            f"({dtype} {shape}) says: truncated?"
        )
    return dtype, (int(shape[0]), int(shape[1])), offset


def _torch_dtype(dtype: np.dtype, path: Path) -> torch.dtype:
    if not dtype.isnative:
        raise ValueError(f"row file '{path}' holds {dtype.str}, not this machine's byte order")
    try:
        return torch.from_numpy(np.empty(0, dtype=dtype)).dtype
    except TypeError:
        raise ValueError(
            f"row file '{path}' holds dtype {dtype}, which torch cannot hold"
        ) from None


def _checked_ids(ids, num_rows: int) -> torch.Tensor:
    if not isinstance(ids, torch.Tensor):
        raise TypeError(f"RowFile.read: 'ids' must be a torch tensor (got {type(ids).__name__})")
    if ids.dtype not in (torch.int32, torch.int64) or ids.dim() != 1 or ids.device.type != "cpu":
        raise TypeError(
            f"RowFile.read: 'ids' must be a 1-D int32 or int64 CPU tensor (got {ids.dtype} "
            f"{tuple(ids.shape)} on {ids.device})"
        )
    ids = ids.contiguous()
    if ids.numel():
        bad = ((ids < 0) | (ids >= num_rows)).nonzero()
        if bad.numel():
            position = int(bad[0, 0])
            raise IndexError(
                f"RowFile.read: id {int(ids[position])} at position {position} is out of range "
                f"for {num_rows} rows"
            )
    return ids


def direct_alignment(fd: int) -> int:
    """The alignment O_DIRECT needs on ``fd``'s file (``statx``'s ``stx_dio_mem_align`` and
    ``stx_dio_offset_align``), or :data:`DEFAULT_DIRECT_ALIGN` where the kernel does not say."""
    try:
        statx = ctypes.CDLL(None, use_errno=True).statx
    except (OSError, AttributeError):
        return DEFAULT_DIRECT_ALIGN
    buffer = ctypes.create_string_buffer(256)
    if statx(fd, b"", 0x1000, _STATX_DIOALIGN, buffer) != 0:  # 0x1000: AT_EMPTY_PATH
        return DEFAULT_DIRECT_ALIGN
    mask = int.from_bytes(buffer.raw[0:4], "little")
    memory = int.from_bytes(buffer.raw[152:156], "little")
    offset = int.from_bytes(buffer.raw[156:160], "little")
    if not mask & _STATX_DIOALIGN or not memory or not offset:
        return DEFAULT_DIRECT_ALIGN
    align = max(memory, offset)
    return align if align & (align - 1) == 0 else DEFAULT_DIRECT_ALIGN


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
