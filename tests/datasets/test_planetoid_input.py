"""Malformed Planetoid files (out-of-range pickled matrices, negative test ids or node ids)
are refused with a ``ValueError`` naming the file and the bad value."""

import pickle

import numpy as np
import pytest
import scipy.sparse as sp

from graphengine.datasets.planetoid import load_planetoid


def write_planetoid(root, **changes):
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
                pickle.dump(value, f)
    index = parts.get("test.index", range(510, 530))
    (raw / "ind.cora.test.index").write_text("".join(f"{i}\n" for i in index))
    return raw


def test_valid_planetoid_reads(tmp_path):
    write_planetoid(tmp_path)
    dataset = load_planetoid("cora", tmp_path)
    assert dataset.num_nodes == 530 and dataset.graph.num_edges == 529


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
