"""Benchmark output: an aligned table for people, then one JSON line for machines."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence


def print_report(headers: Sequence[str], rows: Sequence[Sequence], summary: dict | None) -> None:
    """Print ``rows`` under ``headers`` as a table, then ``summary`` as one JSON line (none
    when ``summary`` is ``None``: a report of several tables ends with one line)."""
    cells = [[_format(v) for v in row] for row in rows]
    widths = [max(len(str(h)), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    lines = [
        "  ".join(str(h).ljust(w) for h, w in zip(headers, widths, strict=True)),
        "  ".join("-" * w for w in widths),
    ]
    lines += ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    if summary is not None:
        lines.append(json.dumps(summary))
    sys.stdout.write("\n".join(lines) + "\n")
    sys.stdout.flush()


def _format(value) -> str:
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)
