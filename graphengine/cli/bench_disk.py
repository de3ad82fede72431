"""``graphengine bench disk``: random reads of a scratch file at 1 and 64 in flight, per read
engine, O_DIRECT and buffered."""

from __future__ import annotations

from pathlib import Path

from . import options, values


def add_parser(benches) -> None:
    disk = options.add_command(
        benches, "disk", "random disk reads per engine at 1 and 64 in flight (read_rows)"
    )
    disk.add_argument(
        "--path",
        help="scratch file to write (or reuse when big enough) and keep; default: a "
        "temporary file, removed after",
    )
    disk.add_argument(
        "--size",
        type=values.byte_size,
        default=2 * 2**30,
        help="scratch file size, larger than the disk cache (default 2GiB)",
    )
    disk.add_argument(
        "--seconds", type=values.positive_float, default=3.0, help="seconds per measurement"
    )
    disk.set_defaults(run=run)


def run(args) -> int:
    from graphengine.bench import disk

    if args.size < 2**20:
        raise ValueError(f"--size must be at least 1MiB (got {args.size} bytes)")
    disk.run(Path(args.path) if args.path else None, args.size, args.seconds)
    return 0
