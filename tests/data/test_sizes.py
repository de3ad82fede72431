"""Sizes written as text: one parser for the cache, memory and limit options."""

import pytest

from graphengine.data.sizes import BYTE_UNITS, parse_size


@pytest.mark.parametrize(
    "text, parsed",
    [
        ("100000", (100000.0, "")),
        ("5%", (5.0, "%")),
        (" 1.5GiB ", (1.5, "gib")),
        ("64mb", (64.0, "mb")),
        ("4096B", (4096.0, "b")),
        ("2TB", (2.0, "tb")),
    ],
)
def test_a_size_is_its_number_and_unit(text, parsed):
    assert parse_size(text) == parsed


@pytest.mark.parametrize("text", ["", "-5", "5 %%", "1.5 GiBs", "GB", "1e3", "5,5MB", "0x10"])
def test_anything_else_is_none(text):
    assert parse_size(text) is None


def test_units_are_powers_of_ten_and_two():
    assert BYTE_UNITS["gb"] == 10**9 and BYTE_UNITS["gib"] == 2**30
