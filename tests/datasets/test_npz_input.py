"""Malformed gnn-benchmark ``.npz`` arrays are refused with a ``ValueError`` naming the array,
the file and the bad value, before scipy's unchecked densify writes outside its array."""

import struct
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphengine.datasets import load_dataset
from graphengine.datasets.npz import load_npz
from tests.helpers.damage import flip_or_cut
from tests.helpers.special_files import fifo


def write_npz(path, compressed=False, **changes):
    """A valid 4-node, 3-feature gnn-benchmark file (a path 0-1-2-3), with ``changes``;
    deflated when ``compressed``, as the published files are."""
    arrays = {
        "adj_data": np.ones(3),
        "adj_indices": np.array([1, 2, 3]),
        "adj_indptr": np.array([0, 1, 2, 3, 3]),
        "adj_shape": np.array([4, 4]),
        "attr_data": np.ones(4),
        "attr_indices": np.array([0, 1, 2, 0]),
        "attr_indptr": np.array([0, 1, 2, 3, 4]),
        "attr_shape": np.array([4, 3]),
        "labels": np.array([0, 1, 0, 1]),
    }
    (np.savez_compressed if compressed else np.savez)(path, **{**arrays, **changes})
    return path


def test_valid_npz_reads(tmp_path):
    dataset = load_npz(write_npz(tmp_path / "g.npz"))
    assert dataset.num_nodes == 4 and dataset.graph.num_edges == 6
    assert dataset.x.tolist() == [[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 0, 0]]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"attr_indices": np.array([0, 1, 2, 99])}, r"'attr_indices'.*99.*\[0, 3\)"),
        ({"attr_indices": np.array([0, -7, 2, 0])}, r"'attr_indices'.*-7.*\[0, 3\)"),
        ({"attr_indptr": np.array([0, 1, 2, 3, 400])}, r"'attr_indptr'.*end at 4.*400"),
        ({"attr_indptr": np.array([0, 1, 2, 3, 4, 4])}, r"'attr_indptr'.*5 entries.*got 6"),
        ({"attr_indptr": np.array([-2, 1, 2, 3, 4])}, r"'attr_indptr'.*start at 0.*-2"),
        ({"adj_indices": np.array([1, 2, 1000])}, r"'adj_indices'.*1000.*\[0, 4\)"),
        ({"adj_indptr": np.array([0, 1, 3, 2, 3])}, r"'adj_indptr'.*not decrease.*3 then 2.*3"),
        ({"adj_indptr": np.array([0.0, 1, 2, 3, 3])}, r"'adj_indptr'.*integer.*float64"),
        ({"attr_data": np.ones(2)}, r"'attr_data'.*4 entries.*got 2"),
        ({"attr_shape": np.array([-4, 3])}, r"'attr_shape'.*non-negative.*\[-4, 3\]"),
        ({"attr_shape": np.array([4])}, r"'attr_shape'.*two"),
        ({"adj_shape": np.array([4, -1])}, r"'adj_shape'.*\[4, -1\]"),
        (
            {"adj_shape": np.array([5, 5]), "adj_indptr": np.array([0, 1, 2, 3, 3, 3])},
            r"'adj_shape'.*\(4, 4\).*attr_shape",
        ),
    ],
)
def test_malformed_npz_arrays_are_named(tmp_path, changes, message):
    path = write_npz(tmp_path / "bad.npz", **changes)
    with pytest.raises(ValueError, match=message) as error:
        load_npz(path)
    assert "bad.npz" in str(error.value)
    with pytest.raises(ValueError, match=message):
        load_dataset(str(path))


def test_npz_negative_labels_are_refused(tmp_path):
    path = write_npz(tmp_path / "neg.npz", labels=np.array([0, 1, -3, 1]))
    with pytest.raises(ValueError, match=r"'labels'.*neg\.npz.*label -3.*\[0, 2\)"):
        load_npz(path)


def test_a_bad_npz_leaves_an_earlier_dataset_alone(tmp_path):
    """An ``attr_indices`` of 10**7 loaded after a valid file once wrote a 1.0 into the earlier
    dataset's ``x`` (scipy densified past its array); a too-narrow ``attr_shape`` read a wrong
    ``x``. Both are refused before scipy sees them, and the earlier ``x`` is untouched."""
    good = load_npz(write_npz(tmp_path / "good.npz"))
    before = good.x.copy()
    far = write_npz(tmp_path / "far.npz", attr_indices=np.array([0, 1, 2, 10**7]))
    with pytest.raises(ValueError, match=r"'attr_indices'.*far\.npz.*10000000.*\[0, 3\)"):
        load_npz(far)
    narrow = write_npz(tmp_path / "narrow.npz", attr_shape=np.array([4, 2]))
    with pytest.raises(ValueError, match=r"'attr_indices'.*narrow\.npz.*column 2.*\[0, 2\)"):
        load_npz(narrow)
    assert np.array_equal(good.x, before)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"adj_indices": np.array([1.0, 2.0, 3.0])}, r"'adj_indices'.*integer.*float64"),
        ({"adj_indices": np.array([1.5, 2.0, 3.0])}, r"'adj_indices'.*integer.*float64"),
        ({"labels": np.array([0.0, 1.0, 0.0, 1.0])}, r"'labels'.*integer class ids.*float64"),
        ({"labels": np.array([0.0, 1.7, 0.0, 1.0])}, r"'labels'.*integer class ids.*float64"),
    ],
    ids=["whole-float-indices", "fractional-indices", "whole-float-labels", "fractional-labels"],
)
def test_float_indices_or_labels_are_refused_not_truncated(tmp_path, changes, message):
    with pytest.raises(ValueError, match=message):
        load_npz(write_npz(tmp_path / "float.npz", **changes))


def test_a_fifo_in_place_of_the_file_is_named_not_missing_nor_opened(tmp_path):
    path = fifo(tmp_path / "cora_full.npz")  # opening it would wait for a writer forever
    with pytest.raises(ValueError, match=r"gnn-benchmark file '.*cora_full\.npz' is a FIFO"):
        load_npz(path)


def test_the_optional_arrays_of_the_format_are_not_read(tmp_path):
    """gnn-benchmark files may also hold node and class names (``idx_to_node``,
    ``class_names``), some as pickled objects: the reader never loads them."""
    path = write_npz(tmp_path / "named.npz", class_names=np.array([object(), "b"], dtype=object))
    assert load_npz(path).num_nodes == 4


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_any_flipped_or_cut_byte_is_a_clear_error_or_a_checked_graph(data):
    """Whatever byte of a (compressed or plain) gnn-benchmark file is flipped, or wherever it
    is cut, reading it gives a ValueError naming the file or a dataset whose arrays passed
    the checks: never zlib's, the zip reader's or NumPy's own exception."""
    compressed = data.draw(st.booleans(), label="compressed")
    with tempfile.TemporaryDirectory() as folder:
        path = write_npz(Path(folder) / "g.npz", compressed=compressed)
        flip_or_cut(path, data)
        try:
            dataset = load_npz(path)
        except ValueError as error:
            assert "g.npz" in str(error)
        else:
            assert dataset.x.shape[0] == dataset.num_nodes == len(dataset.y)


def _first_member_data(archive: bytes) -> int:
    """Where the first member's (compressed) data starts in a zip archive: after its local
    header of 30 bytes, its name and its extra field."""
    name_length, extra_length = struct.unpack_from("<HH", archive, 26)
    return 30 + name_length + extra_length


@pytest.mark.parametrize(
    "damage",
    [
        "unknown compression method",  # the zip reader's NotImplementedError
        "invalid deflate block",  # zlib.error
    ],
)
def test_a_damaged_compressed_member_is_a_clear_error(tmp_path, damage):
    path = write_npz(tmp_path / "damaged.npz", compressed=True)
    archive = bytearray(path.read_bytes())
    if damage == "unknown compression method":
        # what the zip reader goes by: the method in the first central directory entry
        struct.pack_into("<H", archive, archive.index(b"PK\x01\x02") + 10, 99)
    else:
        archive[_first_member_data(archive)] = 0b111  # the last block, of the reserved type 3
    path.write_bytes(bytes(archive))
    with pytest.raises(ValueError, match=r"damaged\.npz' is not a readable \.npz archive"):
        load_npz(path)
