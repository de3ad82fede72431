"""Sizes written as text, as options and arguments take them: ``64MB``, ``1.5GiB``, ``5%``,
``100000``."""

from __future__ import annotations

import re

_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(%|[a-zA-Z]*)\s*")
#: Bytes per unit of a size, by the unit's lowercase name (``""``: a bare number).
BYTE_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
BYTE_UNITS.update({"kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40})


def parse_size(text: str) -> tuple[float, str] | None:
    """``(value, unit)`` of a non-negative number with an optional unit: ``"%"``, a key of
    :data:`BYTE_UNITS`, or ``""`` (none); the unit lowercased. ``None`` for any other text
    (a sign, an unknown unit, no number)."""
    match = _SIZE.fullmatch(str(text))
    if match is None:
        return None
    unit = match.group(2).lower()
    if unit != "%" and unit and unit not in BYTE_UNITS:
        return None
    return float(match.group(1)), unit
