"""Store manifests missing a key, or holding a bad count, are refused with a ``ValueError``
naming the manifest file and the key."""

import json

import pytest

from graphengine.datasets import GraphDataset, SyntheticSpec, generate
from graphengine.datasets.catalog import HETERO
from graphengine.datasets.hetero import HeteroGraphDataset, generate_hetero


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
