"""float16 stores: written, opened, compacted from a float32 store (features equal to NumPy's
``astype(float16)``, the graph unchanged, int64 indices narrowed), the manifest written last,
and values beyond float16's range refused."""

import dataclasses
import json
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphengine.data import format as store_format
from graphengine.data.format import feature_rows
from graphengine.data.graph_store import Graph
from graphengine.data.output_files import WriteError
from graphengine.datasets import compact
from graphengine.datasets.catalog import generate_store
from graphengine.datasets.compact import compact_store
from graphengine.datasets.dataset import GraphDataset
from graphengine.datasets.hetero import HeteroGraphDataset
from graphengine.datasets.papers import PapersSpec, write_papers
from graphengine.datasets.synthetic import SyntheticSpec, generate


@pytest.fixture(scope="module")
def small():
    return generate("s", SyntheticSpec(500, 5000, 8, 3, 100, 50, seed=1))


@pytest.fixture
def saved(small, tmp_path):
    path = tmp_path / "store"
    small.save(path)
    return path


def test_a_float16_store_round_trips(small, tmp_path):
    half = dataclasses.replace(small, x=small.x.astype(np.float16))
    half.save(tmp_path / "half")
    opened = GraphDataset.load(tmp_path / "half")
    assert opened.x.dtype == np.float16
    np.testing.assert_array_equal(opened.x, small.x.astype(np.float16))
    assert json.loads((tmp_path / "half" / "dataset.json").read_text())["arrays"]["x"][0] == (
        "float16"
    )


def test_compact_features_equal_numpy_astype_and_the_graph_is_unchanged(small, saved, tmp_path):
    out = tmp_path / "half"
    report = compact_store(saved, out, chunk_bytes=200)  # many chunks of a few rows
    opened = GraphDataset.load(out)
    assert opened.x.dtype == np.float16
    np.testing.assert_array_equal(opened.x, small.x.astype(np.float16))
    np.testing.assert_array_equal(opened.graph.indptr, small.graph.indptr)
    np.testing.assert_array_equal(opened.graph.indices, small.graph.indices)
    assert opened.graph.indices.dtype == small.graph.indices.dtype == np.int32
    for name in ("y", "train_idx", "val_idx", "test_idx"):
        np.testing.assert_array_equal(getattr(opened, name), getattr(small, name))
    assert (opened.name, opened.num_classes) == (small.name, small.num_classes)
    assert report.converted == {"x.npy": "float32 -> float16"}
    saved_x = (saved / "x.npy").stat().st_size - (out / "x.npy").stat().st_size
    assert report.source_bytes - report.out_bytes == saved_x == small.x.size * 2


def test_compact_narrows_int64_indices_to_int32(small, tmp_path):
    wide = Graph(small.graph.indptr, small.graph.indices.astype(np.int64))
    dataclasses.replace(small, graph=wide).save(tmp_path / "wide")
    report = compact_store(tmp_path / "wide", tmp_path / "half", chunk_bytes=1000)
    opened = GraphDataset.load(tmp_path / "half")
    assert opened.graph.indices.dtype == np.int32
    np.testing.assert_array_equal(opened.graph.indices, small.graph.indices)
    assert report.converted["graph/indices.npy"] == "int64 -> int32"


def test_compact_back_to_float32_and_with_links(small, saved, tmp_path):
    compact_store(saved, tmp_path / "half")
    compact_store(tmp_path / "half", tmp_path / "back", "float32", link=True)
    opened = GraphDataset.load(tmp_path / "back")
    np.testing.assert_array_equal(opened.x, small.x.astype(np.float16).astype(np.float32))
    # hard links where the file system has them: the same inode as the source's
    same = (tmp_path / "half" / "y.npy").stat().st_ino == (
        tmp_path / "back" / "y.npy"
    ).stat().st_ino
    assert same


def test_compact_copies_a_hetero_store(tmp_path):
    generate_store("synthetic-hetero-s", tmp_path)
    source = tmp_path / "synthetic-hetero-s"
    compact_store(source, tmp_path / "half")
    full, half = HeteroGraphDataset.load(source), HeteroGraphDataset.load(tmp_path / "half")
    for node_type, x in full.x.items():
        assert half.x[node_type].dtype == np.float16
        np.testing.assert_array_equal(half.x[node_type], x.astype(np.float16))
    for edge_type, edges in full.edge_index.items():
        np.testing.assert_array_equal(half.edge_index[edge_type], edges)


@pytest.mark.parametrize("value", [65505.0, -7.0e4, 3.0e38])
def test_a_value_beyond_float16_is_refused_naming_row_and_column(small, tmp_path, value):
    x = small.x.copy()
    x[321, 5] = value
    dataclasses.replace(small, x=x).save(tmp_path / "big")
    with pytest.raises(
        ValueError,
        match=rf"x\.npy' row 321, column 5 holds {re.escape(str(np.float32(value)))}, beyond",
    ):
        compact_store(tmp_path / "big", tmp_path / "half", chunk_bytes=100)
    assert not (tmp_path / "half").exists()  # the partial copy is removed


def test_the_largest_float16_and_non_finite_values_pass():
    rows = np.array([[65504.0, -65504.0, np.inf, np.nan]], dtype=np.float32)
    out = feature_rows(rows, "float16", "x.npy")
    np.testing.assert_array_equal(out, rows.astype(np.float16))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(width=32, allow_nan=False), min_size=1, max_size=40))
def test_feature_rows_is_astype_or_refuses_exactly_the_values_beyond_float16(values):
    rows = np.array(values, dtype=np.float32).reshape(1, -1)
    beyond = np.isfinite(rows) & (np.abs(rows) > 65504)
    if beyond.any():
        with pytest.raises(ValueError, match="beyond float16's largest value 65504"):
            feature_rows(rows, "float16", "x.npy")
    else:
        np.testing.assert_array_equal(feature_rows(rows, "float16", "x.npy"), rows.astype("f2"))


def test_a_write_failing_midway_leaves_no_store_that_opens(saved, tmp_path, monkeypatch):
    """A full disk halfway through the features: the error names the store, and the folder,
    even if nothing removed it (a killed run), does not open: the manifest comes last."""
    calls = []
    real = store_format.feature_rows

    def failing(rows, *args):
        calls.append(rows.shape[0])
        if len(calls) == 3:
            raise OSError(28, "No space left on device", str(tmp_path / "half" / "x.npy"))
        return real(rows, *args)

    written = []
    real_manifest = compact.write_manifest

    def recording(path, *args):
        written.append(path.name)
        return real_manifest(path, *args)

    monkeypatch.setattr(compact, "feature_rows", failing)
    monkeypatch.setattr(compact, "write_manifest", recording)
    monkeypatch.setattr("graphengine.datasets.writing.shutil.rmtree", lambda *a, **k: None)
    with pytest.raises(WriteError, match="No space left on device"):
        compact_store(saved, tmp_path / "half", chunk_bytes=500)
    assert len(calls) == 3 and written == []
    assert (tmp_path / "half" / "x.npy").exists()  # the killed run's part stays here
    with pytest.raises(FileNotFoundError, match=r"dataset\.json"):
        GraphDataset.load(tmp_path / "half")
    monkeypatch.undo()
    written.clear()
    monkeypatch.setattr(compact, "write_manifest", recording)
    compact_store(saved, tmp_path / "whole")
    assert written == ["graph.json", "dataset.json"]  # the dataset's manifest last


def test_paths_are_checked_before_anything_is_written(saved, tmp_path):
    with pytest.raises(FileNotFoundError, match="no store at"):
        compact_store(tmp_path / "missing", tmp_path / "out")
    with pytest.raises(ValueError, match="exists; pick a new --out"):
        compact_store(saved, saved)
    with pytest.raises(ValueError, match="lies inside the source store"):
        compact_store(saved, saved / "half")
    with pytest.raises(ValueError, match="'feature_dtype' must be one of float32, float16"):
        compact_store(saved, tmp_path / "out", "bfloat16")
    assert not (saved / "half").exists() and not (tmp_path / "out").exists()


def test_a_float16_papers_store_is_the_float32_one_rounded(tmp_path):
    spec = PapersSpec(10)
    full = write_papers(spec, tmp_path / "full")
    half = write_papers(spec, tmp_path / "half", feature_dtype="float16")
    assert half.x.dtype == np.float16
    np.testing.assert_array_equal(half.x, np.asarray(full.x).astype(np.float16))
    np.testing.assert_array_equal(half.graph.indices, full.graph.indices)


def test_generate_refuses_an_existing_store_of_another_feature_dtype(tmp_path):
    generate_store("synthetic-small", tmp_path, feature_dtype="float16")
    assert GraphDataset.load(tmp_path / "synthetic-small").x.dtype == np.float16
    assert generate_store("synthetic-small", tmp_path).x.dtype == np.float16  # as it is
    with pytest.raises(ValueError, match="holds float16 features, not the float32 asked for"):
        generate_store("synthetic-small", tmp_path, feature_dtype="float32")
