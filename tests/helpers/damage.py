"""Damaging a file the way a disk or a copy does, for property tests of its readers."""

from pathlib import Path

from hypothesis import strategies as st


def flip_or_cut(path: Path, data: st.DataObject) -> None:
    """Rewrite ``path`` with one byte flipped (some of its bits) or cut short at a byte,
    both drawn from ``data``."""
    good = bytearray(path.read_bytes())
    position = data.draw(st.integers(0, len(good) - 1), label="position")
    if data.draw(st.booleans(), label="flip (else cut)"):
        good[position] ^= data.draw(st.integers(1, 255), label="bits")
        path.write_bytes(bytes(good))
    else:
        path.write_bytes(bytes(good[:position]))
