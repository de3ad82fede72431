"""Malformed Planetoid files (out-of-range pickled matrices, negative test ids or node ids)
are refused with a ``ValueError`` naming the file and the bad value; pickles that would run
code are refused, naming the file and the global, before any of it runs."""

import builtins
import codecs
import os
import pickle
import struct
import subprocess

import numpy as np
import pytest
import scipy.sparse as sp

from graphengine.data.pickled import load_data_pickle
from graphengine.datasets.planetoid import load_planetoid


class Calls:
    """Pickles as a call of ``function(*args)``, which unpickling it makes."""

    def __init__(self, function, *args):
        self.function, self.args = function, args

    def __reduce__(self):
        return self.function, self.args


def write_planetoid(root, protocol=pickle.DEFAULT_PROTOCOL, **changes):
    """A valid 530-node ``cora``: 10 labelled training rows, 500 more rows (PyG's validation
    split), 20 test rows; 4 features, 2 classes; a path graph."""
    raw = root / "Cora" / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    labels = np.eye(2)[rng.integers(0, 2, size=530)]
    features = sp.csr_matrix(rng.integers(0, 2, size=(530, 4)).astype(np.float32))
    parts = {
        "x": features[:10],
        "tx": features[510:],
        "allx": features[:510],
        "y": labels[:10],
        "ty": labels[510:],
        "ally": labels[:510],
        "graph": {i: [i + 1] for i in range(529)},
    }
    parts.update(changes)
    for part, value in parts.items():
        if part != "test.index":
            with (raw / f"ind.cora.{part}").open("wb") as f:
                pickle.dump(value, f, protocol=protocol)
    index = parts.get("test.index", range(510, 530))
    (raw / "ind.cora.test.index").write_text("".join(f"{i}\n" for i in index))
    return raw


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_valid_planetoid_reads(tmp_path, protocol):
    write_planetoid(tmp_path, protocol=protocol)
    dataset = load_planetoid("cora", tmp_path)
    assert dataset.num_nodes == 530 and dataset.graph.num_edges == 529


def calls_that_touch(marker, tmp_path):
    """Each call that, run, creates ``marker``, as (function, args); ``numpy.load`` opens a
    second pickle that calls ``os.system``."""
    inner = tmp_path / "inner.pkl"
    inner.write_bytes(pickle.dumps(Calls(os.system, f"touch {marker}")))
    return {
        "os.system": (os.system, (f"touch {marker}",)),
        "builtins.eval": (builtins.eval, (f"open({str(marker)!r}, 'w')",)),
        "subprocess.Popen": (subprocess.Popen, (["touch", str(marker)],)),
        "numpy.load": (np.load, (str(inner), None, True)),
    }


@pytest.mark.parametrize("call", ["os.system", "builtins.eval", "subprocess.Popen", "numpy.load"])
@pytest.mark.parametrize("part", ["x", "graph"])
def test_planetoid_pickle_that_calls_code_is_refused_before_it_runs(tmp_path, call, part):
    marker = tmp_path / "ran"
    function, args = calls_that_touch(marker, tmp_path)[call]
    # In the graph, the call hides among the node ids of an otherwise valid dict.
    value = Calls(function, *args) if part == "x" else {0: [1], 1: [Calls(function, *args)]}
    write_planetoid(tmp_path / "root", **{part: value})
    name = f"{function.__module__}.{function.__qualname__}"  # os.system is posix.system
    with pytest.raises(ValueError, match=rf"ind\.cora\.{part}'.*'{name}'") as error:
        load_planetoid("cora", tmp_path / "root")
    assert "nothing of the file was run" in str(error.value)
    assert not marker.exists()


def test_planetoid_pickle_cannot_rewrite_a_class(tmp_path):
    """BUILD on the csr_matrix class itself, with a slot state, would set its ``_format`` for
    the whole process (and with it turn off the index checks of every matrix read after)."""
    module = sp.csr_matrix.__module__.encode()
    crafted = (
        b"\x80\x02c" + module + b"\ncsr_matrix\nN}X\x07\x00\x00\x00_formatX\x03\x00\x00\x00lil"
        b"s\x86b."
    )
    raw = write_planetoid(tmp_path)
    (raw / "ind.cora.x").write_bytes(crafted)
    with pytest.raises(ValueError, match=r"ind\.cora\.x'.*refused to set the state of"):
        load_planetoid("cora", tmp_path)
    assert sp.csr_matrix((2, 2)).format == "csr"


@pytest.mark.parametrize(
    "value",
    [np.zeros((10, 2), dtype=[("a", "<i4"), ("b", "<f8")]), np.dtype(("<f4", (2,)))],
    ids=["array of fields", "sub-array dtype"],
)
def test_planetoid_structured_dtype_is_refused(tmp_path, value):
    write_planetoid(tmp_path, y=value)
    with pytest.raises(ValueError, match=r"ind\.cora\.y'.*refused the dtype"):
        load_planetoid("cora", tmp_path)


class Builds:
    """Pickles as ``function(*args)`` whose result BUILD then gives ``state``."""

    def __init__(self, function, args, state):
        self.function, self.args, self.state = function, args, state

    def __reduce__(self):
        return self.function, self.args, self.state


# NumPy's flags of a dtype whose items are pointers to objects, without the two that make
# NumPy pickle such an array as a list and count its references.
FORGED_FLAGS = 0x7C


@pytest.mark.parametrize("made_by", ["_reconstruct", "ndarray"])
def test_a_pickle_cannot_make_an_array_of_pointers_from_its_bytes(tmp_path, made_by):
    """An object dtype whose flags a BUILD forged would take eight bytes of the file as the
    address of a Python object (here a real one, so that the old reader returned it instead
    of crashing); no dtype of objects, fields or forged flags is made."""
    target = object()
    dtype = Builds(np.dtype, ("O", False, True), (3, "|", None, None, None, -1, -1, FORGED_FLAGS))
    address = struct.pack("<Q", id(target))
    if made_by == "_reconstruct":
        reconstruct = np.zeros(1).__reduce__()[0]
        forged = Builds(reconstruct, (np.ndarray, (0,), b"b"), (1, (1,), dtype, False, address))
    else:
        forged = Calls(np.ndarray, (1,), dtype, address)
    path = tmp_path / "forged.pkl"
    path.write_bytes(pickle.dumps(forged, protocol=2))
    with pytest.raises(pickle.UnpicklingError, match=r"refused the dtype dtype\('O'\)"):
        load_data_pickle(path)


def test_a_plain_dtype_whose_state_forges_its_flags_is_refused(tmp_path):
    dtype = Builds(np.dtype, ("f8", False, True), (3, "<", None, None, None, -1, -1, 0x3F))
    path = tmp_path / "forged.pkl"
    path.write_bytes(pickle.dumps(dtype, protocol=2))
    with pytest.raises(pickle.UnpicklingError, match=r"refused a dtype whose state makes it"):
        load_data_pickle(path)


def test_bytes_are_decoded_only_as_latin1(tmp_path):
    path = tmp_path / "codec.pkl"
    path.write_bytes(pickle.dumps(Calls(codecs.encode, "x", "rot13"), protocol=2))
    with pytest.raises(pickle.UnpicklingError, match=r"refused the codec 'rot13'"):
        load_data_pickle(path)
    path.write_bytes(pickle.dumps(b"\x00\xff", protocol=2))  # encoded through latin-1
    assert load_data_pickle(path) == b"\x00\xff"


def test_planetoid_matrix_whose_attributes_are_not_its_own_is_named(tmp_path):
    """A matrix whose pickled shape is not a pair, or that lacks its data: its own methods
    raised a TypeError or AttributeError naming no file."""
    raw = write_planetoid(tmp_path)
    for change in ({"_shape": 5}, {"data": None}):
        tx = sp.csr_matrix(np.ones((20, 4), dtype=np.float32))
        tx.__dict__.update(change)
        if change == {"data": None}:
            del tx.data
        with (raw / "ind.cora.tx").open("wb") as f:
            pickle.dump(tx, f)
        with pytest.raises(ValueError, match=r"corrupt Planetoid file '.*ind\.cora\.tx'"):
            load_planetoid("cora", tmp_path)


def test_planetoid_matrix_attributes_from_the_file_are_not_trusted(tmp_path):
    """A pickled matrix whose ``_format`` says 'lil' would skip the CSR index checks, and
    densifying it would write its out-of-range entry into another row."""
    tx = sp.csr_matrix(np.ones((20, 4), dtype=np.float32))
    tx.indices[5] = 4
    tx._format = "lil"
    write_planetoid(tmp_path, tx=tx)
    with pytest.raises(ValueError, match=r"ind\.cora\.tx'.*indices hold 4, outside \[0, 4\)"):
        load_planetoid("cora", tmp_path)


@pytest.mark.parametrize(
    ("part", "value", "expected"),
    [
        ("x", [[1.0, 2.0]], "holds a list, expected a 2-D matrix of numbers"),
        ("ally", np.array([[1, "a"]], dtype=object), r"refused the dtype dtype\('O'\)"),
        ("graph", [[0, 1]], "holds a list, expected a dict"),
    ],
)
def test_planetoid_part_of_another_kind_is_named(tmp_path, part, value, expected):
    write_planetoid(tmp_path, **{part: value})
    with pytest.raises(ValueError, match=rf"ind\.cora\.{part}'.*{expected}"):
        load_planetoid("cora", tmp_path)


def test_planetoid_matrix_with_indices_out_of_range_is_named(tmp_path):
    tx = sp.csr_matrix(np.ones((20, 4), dtype=np.float32))
    tx.indices[5] = 1_000_000  # scipy does not check again: densifying would write past x
    write_planetoid(tmp_path, tx=tx)
    with pytest.raises(ValueError, match=r"ind\.cora\.tx'.*1000000"):
        load_planetoid("cora", tmp_path)
    allx = sp.csr_matrix(np.ones((510, 4), dtype=np.float32))
    allx.indptr[3] = 10_000
    write_planetoid(tmp_path, allx=allx)
    with pytest.raises(ValueError, match=r"ind\.cora\.allx'"):
        load_planetoid("cora", tmp_path)


def test_planetoid_negative_test_index_is_named(tmp_path):
    write_planetoid(tmp_path, **{"test.index": [510, -3, *range(512, 530)]})
    with pytest.raises(ValueError, match=r"ind\.cora\.test\.index'.*-3"):
        load_planetoid("cora", tmp_path)


@pytest.mark.parametrize("graph", [{0: [1], -2: [1]}, {0: [1, -5]}])
def test_planetoid_negative_node_id_in_graph_is_named(tmp_path, graph):
    write_planetoid(tmp_path, graph=graph)
    with pytest.raises(ValueError, match=r"ind\.cora\.graph'.*node id -[25]"):
        load_planetoid("cora", tmp_path)
