"""Store manifests missing a key, holding a field of the wrong type or range, or naming a file
outside the store, are refused with a ``ValueError`` naming the manifest file and the field;
array files that are not regular files, features that are not float32 and splits listing a
node twice are refused naming the file."""

import json
import os

import numpy as np
import pytest

from graphengine.datasets import GraphDataset, SyntheticSpec, generate, load_dataset
from graphengine.datasets.catalog import HETERO
from graphengine.datasets.hetero import HeteroGraphDataset, generate_hetero
from graphengine.datasets.reorder import original_ids, reorder_dataset
from tests.helpers.special_files import fifo, tmpfs


@pytest.fixture(scope="module")
def small():
    return generate("s", SyntheticSpec(100, 1000, 4, 3, 10, 10))


@pytest.mark.parametrize(
    ("folder", "manifest", "key"),
    [
        ("d", "dataset.json", "num_classes"),
        ("d", "dataset.json", "arrays"),
        ("d/graph", "graph.json", "num_nodes"),
        ("d/graph", "graph.json", "arrays"),
    ],
)
def test_manifest_missing_a_key_is_named(small, tmp_path, folder, manifest, key):
    small.save(tmp_path / "d")
    path = tmp_path / folder / manifest
    fields = json.loads(path.read_text())
    del fields[key]
    path.write_text(json.dumps(fields))
    with pytest.raises(ValueError, match=rf"'{path}'.*no '{key}'"):
        GraphDataset.load(tmp_path / "d")


def test_graph_manifest_with_a_negative_count_is_named(small, tmp_path):
    small.save(tmp_path / "d")
    path = tmp_path / "d" / "graph" / "graph.json"
    fields = json.loads(path.read_text())
    fields["num_nodes"] = -5
    path.write_text(json.dumps(fields))
    with pytest.raises(ValueError, match=r"graph\.json'.*'num_nodes'.*non-negative.*-5"):
        GraphDataset.load(tmp_path / "d")
    fields["num_nodes"] = "100"
    path.write_text(json.dumps(fields))
    with pytest.raises(ValueError, match=r"graph\.json'.*'num_nodes'.*'100'"):
        GraphDataset.load(tmp_path / "d")


def test_hetero_manifest_missing_a_key_is_named(tmp_path):
    generate_hetero("h", HETERO["synthetic-hetero-s"]).save(tmp_path / "h")
    path = tmp_path / "h" / "dataset.json"
    fields = json.loads(path.read_text())
    del fields["target"]
    path.write_text(json.dumps(fields))
    with pytest.raises(ValueError, match=rf"'{path}'.*no 'target'"):
        HeteroGraphDataset.load(tmp_path / "h")


# -- Untrusted stores: names stay inside the store, fields are checked, arrays are data -------


def _edit(path, **changes):
    """Rewrite the JSON manifest ``path`` with ``changes`` (a value of ``None`` removes the
    key)."""
    fields = json.loads(path.read_text())
    for key, value in changes.items():
        if value is None:
            del fields[key]
        else:
            fields[key] = value
    path.write_text(json.dumps(fields))


@pytest.fixture
def saved(small, tmp_path):
    small.save(tmp_path / "d")
    return tmp_path / "d"


@pytest.mark.parametrize("folder", ["", "graph"])
def test_an_array_file_linked_outside_the_store_is_not_read(saved, tmp_path, folder):
    name = "x.npy" if not folder else "indptr.npy"
    outside = tmp_path / name
    (saved / folder / name).rename(outside)  # the same dtype and shape: it would load
    (saved / folder / name).symlink_to(outside)
    manifest = "dataset.json" if not folder else "graph.json"
    with pytest.raises(ValueError, match=rf"{manifest}'.*/{name}', which leads outside"):
        GraphDataset.load(saved)


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        ({"../x": ["float32", [100, 4]]}, r"'arrays' lists \['\.\./x'"),
        ([["x", "float32"]], r"'arrays' must be a JSON object"),
        ({"x": "float32"}, r"'arrays' entry 'x' must be \[dtype, shape\]"),
        ({"x": ["float32", [100, -4]]}, r"'arrays' entry 'x' must be \[dtype, shape\]"),
        ({"x": ["float32", [100, True]]}, r"'arrays' entry 'x' must be \[dtype, shape\]"),
        ({"x": ["floaty", [100, 4]]}, r"'arrays' entry 'x' has dtype 'floaty'"),
        ({"x": ["object", [100, 4]]}, r"'arrays' entry 'x' has dtype 'object'"),
        ({"x": ["0Ö", [100, 4]]}, r"'arrays' entry 'x' has dtype '0Ö'"),
        ({"x": ["f4,", [100, 4]]}, r"'arrays' entry 'x' has dtype 'f4,'"),
        ({"x": [["f4"], [100, 4]]}, r"'arrays' entry 'x' has dtype \['f4'\]"),
        ({"x": ["f4", [100, 4]]}, r"'x' has dtype 'f4', expected NumPy's name for it, 'float32'"),
        ({"x": ["<f4", [100, 4]]}, r"'x' has dtype '<f4', expected NumPy's name .* 'float32'"),
        ({"x": ["single", [100, 4]]}, r"'x' has dtype 'single', expected .* 'float32'"),
    ],
    ids=[
        "escaping-name",
        "list",
        "bare-dtype",
        "negative",
        "bool",
        "unknown",
        "object",
        "unparsable",
        "structured",
        "list",
        "short-name",
        "byte-order",
        "c-name",
    ],
)
def test_a_malformed_arrays_entry_is_named(saved, arrays, message):
    listed = json.loads((saved / "dataset.json").read_text())["arrays"]
    if isinstance(arrays, dict):
        arrays = {**{k: v for k, v in listed.items() if k != "x"}, **arrays}
    _edit(saved / "dataset.json", arrays=arrays)
    with pytest.raises(ValueError, match=rf"dataset\.json'.*{message}"):
        GraphDataset.load(saved)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("name", 5, r"'name' must be a non-empty string \(got 5\)"),
        ("name", "", r"'name' must be a non-empty string"),
        ("num_classes", 0, r"'num_classes' must be an integer >= 1 \(got 0\)"),
        ("num_classes", "3", r"'num_classes' must be an integer >= 1 \(got '3'\)"),
        ("num_classes", 2.5, r"'num_classes' must be an integer >= 1 \(got 2\.5\)"),
        ("num_classes", 2, r"label \d, outside \[0, 2\)"),
    ],
)
def test_a_malformed_dataset_field_is_named(saved, key, value, message):
    _edit(saved / "dataset.json", **{key: value})
    with pytest.raises(ValueError, match=rf"dataset\.json'.*{message}"):
        GraphDataset.load(saved)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"arrays": {"indptr": "int64", "indices": 32}}, r"'indices' has dtype 32"),
        ({"arrays": {"indptr": "int64", "indices": "complex128"}}, r"dtype 'complex128'"),
        ({"num_edges": 1.5}, r"'num_edges' must be a non-negative integer \(got 1\.5\)"),
        ({"num_edges": None}, r"no 'num_edges'"),
    ],
)
def test_a_malformed_graph_field_is_named(saved, change, message):
    _edit(saved / "graph" / "graph.json", **change)
    with pytest.raises(ValueError, match=rf"graph\.json'.*{message}"):
        GraphDataset.load(saved)


@pytest.mark.parametrize("dtype", [np.int64, np.float64])
def test_features_that_are_neither_float32_nor_float16_are_refused_naming_the_file(saved, dtype):
    x = np.load(saved / "x.npy").astype(dtype)
    np.save(saved / "x.npy", x)
    listed = json.loads((saved / "dataset.json").read_text())["arrays"]
    _edit(saved / "dataset.json", arrays={**listed, "x": [np.dtype(dtype).name, list(x.shape)]})
    with pytest.raises(
        ValueError, match=rf"x\.npy' holds {np.dtype(dtype).name} features.*float32, float16"
    ):
        GraphDataset.load(saved)


@pytest.mark.parametrize("split", ["train", "test"])
def test_a_split_listing_a_node_twice_is_refused_naming_the_file(saved, split):
    ids = np.load(saved / f"{split}_idx.npy")
    ids[-1] = ids[0]
    np.save(saved / f"{split}_idx.npy", ids)
    with pytest.raises(ValueError, match=rf"{split}_idx\.npy' lists node {ids[0]} more than once"):
        GraphDataset.load(saved)


def test_a_fifo_array_is_named_and_never_opened(saved):
    (saved / "y.npy").unlink()
    fifo(saved / "y.npy")  # opening it would wait for a writer forever
    with pytest.raises(ValueError, match=r"y\.npy' \(listed in '.*\.json'\) is a FIFO"):
        GraphDataset.load(saved)


def test_a_symlink_loop_is_named(saved):
    (saved / "y.npy").unlink()
    (saved / "y.npy").symlink_to(saved / "y.npy")
    with pytest.raises(ValueError, match=r"y\.npy'.*a symlink loop"):
        GraphDataset.load(saved)


def test_a_dangling_symlink_is_missing(saved):
    (saved / "y.npy").unlink()
    (saved / "y.npy").symlink_to(saved / "gone.npy")
    with pytest.raises(FileNotFoundError, match=r"missing array file '.*y\.npy'"):
        GraphDataset.load(saved)


@pytest.mark.parametrize("file", ["/etc/hostname", "../order.npy", "graph/../../order.npy", "", 7])
def test_a_reorder_file_outside_the_store_is_not_read(small, tmp_path, file):
    reorder_dataset(small, tmp_path / "r")
    np.save(tmp_path / "order.npy", np.arange(small.num_nodes))
    _edit(tmp_path / "r" / "dataset.json", order={"policy": "degree", "file": file})
    with pytest.raises(ValueError, match=r"dataset\.json'.*'order' entry 'file'"):
        original_ids(tmp_path / "r")


def test_a_malformed_reorder_entry_is_named(small, tmp_path):
    reorder_dataset(small, tmp_path / "r")
    assert np.array_equal(np.sort(original_ids(tmp_path / "r")), np.arange(small.num_nodes))
    _edit(tmp_path / "r" / "dataset.json", order="order.npy")
    with pytest.raises(ValueError, match=r"dataset\.json'.*'order' must be a JSON object"):
        original_ids(tmp_path / "r")


@pytest.fixture
def hetero(tmp_path):
    generate_hetero("h", HETERO["synthetic-hetero-s"]).save(tmp_path / "h")
    return tmp_path / "h"


def test_a_hetero_edge_type_of_a_node_type_without_a_store_is_named(hetero):
    fields = json.loads((hetero / "dataset.json").read_text())
    edge_types = [*fields["edge_types"][:-1], ["paper", "cites", "c"]]
    _edit(hetero / "dataset.json", edge_types=edge_types)
    with pytest.raises(
        ValueError,
        match=r"dataset\.json'.*edge type \('paper', 'cites', 'c'\) names node type 'c', "
        r"which has no store",
    ):
        HeteroGraphDataset.load(hetero)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("num_nodes", [["paper", 5]], r"'num_nodes' must be a JSON object"),
        ("num_nodes", {"../paper": 5}, r"'num_nodes' must map node type names"),
        ("num_nodes", {"paper": -1}, r"'num_nodes' must map node type names.*-1"),
        ("edge_types", "cites", r"'edge_types' must be a list"),
        ("edge_types", [["paper", "cites"]], r"edge type \['paper', 'cites'\] must be"),
        ("edge_types", [["paper", "../x", "paper"]], r"edge type .* three identifiers"),
        ("target", "venue", r"'target' 'venue' is not one of the node types"),
        ("target", 3, r"'target' must be a non-empty string"),
        ("num_classes", True, r"'num_classes' must be an integer >= 1 \(got True\)"),
    ],
)
def test_a_malformed_hetero_field_is_named(hetero, key, value, message):
    _edit(hetero / "dataset.json", **{key: value})
    with pytest.raises(ValueError, match=rf"dataset\.json'.*{message}"):
        HeteroGraphDataset.load(hetero)


def test_hetero_features_that_are_neither_float32_nor_float16_are_refused_naming_the_file(
    hetero,
):
    x = np.load(hetero / "x.author.npy").astype(np.float64)
    np.save(hetero / "x.author.npy", x)
    listed = json.loads((hetero / "dataset.json").read_text())["arrays"]
    _edit(hetero / "dataset.json", arrays={**listed, "x.author": ["float64", list(x.shape)]})
    with pytest.raises(ValueError, match=r"x\.author\.npy' holds float64 features.*float16"):
        HeteroGraphDataset.load(hetero)


def test_a_hetero_split_listing_a_node_twice_is_named(hetero):
    ids = np.load(hetero / "val_idx.npy")
    ids[1] = ids[0]
    np.save(hetero / "val_idx.npy", ids)
    with pytest.raises(ValueError, match=rf"val_idx\.npy' lists node {ids[0]} more than once"):
        HeteroGraphDataset.load(hetero)


def test_a_store_folder_whose_manifest_is_a_fifo_is_named_not_unknown(saved):
    (saved / "dataset.json").unlink()
    fifo(saved / "dataset.json")  # reading it would wait for a writer forever
    with pytest.raises(ValueError, match=r"manifest '.*dataset\.json' is a FIFO"):
        load_dataset(str(saved))


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda order: order.__setitem__(3, 10**6), r"order\.npy' holds node id 1000000"),
        (lambda order: order.__setitem__(0, -1), r"order\.npy' holds node id -1"),
    ],
)
def test_a_reorder_file_holding_ids_outside_the_graph_is_named(small, tmp_path, edit, message):
    reorder_dataset(small, tmp_path / "r")
    order = np.load(tmp_path / "r" / "order.npy")
    edit(order)
    np.save(tmp_path / "r" / "order.npy", order)
    with pytest.raises(ValueError, match=message):
        original_ids(tmp_path / "r")


def test_a_reorder_manifest_whose_labels_are_not_one_a_node_is_named(small, tmp_path):
    reorder_dataset(small, tmp_path / "r")
    listed = json.loads((tmp_path / "r" / "dataset.json").read_text())["arrays"]
    _edit(tmp_path / "r" / "dataset.json", arrays={**listed, "y": ["int64", []]})
    with pytest.raises(ValueError, match=r"dataset\.json'.*'y' must have shape \[num_nodes\]"):
        original_ids(tmp_path / "r")


@pytest.mark.parametrize("linked", ["dataset.json", "graph/graph.json", "graph"])
def test_a_manifest_or_graph_folder_linked_outside_the_store_is_not_read(saved, tmp_path, linked):
    outside = tmp_path / "outside"
    (saved / linked).rename(outside)  # a valid copy: only where it lies is wrong
    (saved / linked).symlink_to(outside)
    with pytest.raises(ValueError, match=r"leads outside"):
        GraphDataset.load(saved)


def test_a_manifest_that_cannot_be_written_whole_leaves_none(tmp_path):
    """On a full disk the manifest, which marks its folder complete, is not left cut short:
    it is absent (and so is its temporary file), and the old one stays when there was one."""
    from graphengine.data.format import write_manifest

    with tmpfs(tmp_path / "disk", size="8k"):
        path = tmp_path / "disk" / "graph.json"
        write_manifest(path, "graph", 1, {"note": "small"})
        before = path.read_text()
        with pytest.raises(OSError):
            write_manifest(path, "graph", 1, {"note": "x" * 65536})
        assert path.read_text() == before
        assert os.listdir(tmp_path / "disk") == ["graph.json"]
