"""OGB files (written here in the ogb package's layout: same names, columns, compression)
convert into exactly the graph, features, labels and splits they describe; malformed, truncated
and missing files are refused with the file (and line)."""

import gzip
import json

import numpy as np
import pytest

from graphengine.cli import main
from graphengine.data.graph_store import Graph
from graphengine.datasets import load_dataset
from graphengine.datasets import ogb as ogb_module
from graphengine.datasets.ogb import convert_ogb

NUM_NODES, NUM_FEATURES = 60, 5


def write_gz(path, lines):
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as out:
        out.write("".join(f"{line}\n" for line in lines))


def random_ogb(seed=0, num_edges=400):
    rng = np.random.default_rng(seed)
    edges = rng.integers(0, NUM_NODES, size=(num_edges, 2))
    x = rng.standard_normal((NUM_NODES, NUM_FEATURES)).astype(np.float32)
    y = rng.integers(0, 40, size=NUM_NODES)
    order = rng.permutation(NUM_NODES)
    splits = {"train": order[:30], "valid": order[30:40], "test": order[40:55]}
    return edges, x, y, splits


def write_splits(folder, scheme, splits):
    for name, ids in splits.items():
        write_gz(folder / "split" / scheme / f"{name}.csv.gz", ids)


def write_csv_ogb(root, folder, scheme, edges, x, y, splits):
    raw = root / folder / "raw"
    write_gz(raw / "num-node-list.csv.gz", [NUM_NODES])
    write_gz(raw / "num-edge-list.csv.gz", [len(edges)])
    write_gz(raw / "edge.csv.gz", [f"{s},{d}" for s, d in edges])
    write_gz(raw / "node-feat.csv.gz", [",".join(f"{v:.9g}" for v in row) for row in x])
    write_gz(raw / "node-label.csv.gz", y)
    write_splits(root / folder, scheme, splits)


def write_papers_ogb(root, edges, x, labels, splits):
    """ogbn-papers100M's binary layout: ``data.npz`` (float16 features, as OGB ships them) and
    ``node-label.npz`` (float64 labels, NaN for unlabelled nodes)."""
    raw = root / "ogbn_papers100M" / "raw"
    raw.mkdir(parents=True)
    np.savez_compressed(
        raw / "data.npz",
        edge_index=edges.T.copy(),
        node_feat=x.astype(np.float16),
        num_nodes_list=np.array([NUM_NODES]),
        num_edges_list=np.array([len(edges)]),
    )
    np.savez_compressed(raw / "node-label.npz", node_label=labels)
    write_splits(root / "ogbn_papers100M", "time", splits)


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of 64 bytes: lines split across blocks, many blocks per file."""
    monkeypatch.setattr(ogb_module, "BLOCK_BYTES", 64)


def assert_converted(dataset, edge_index, x, y, splits):
    expected = Graph.from_edge_index(edge_index, NUM_NODES)
    assert np.array_equal(dataset.graph.indptr, expected.indptr)
    assert np.array_equal(dataset.graph.indices, expected.indices)
    assert np.array_equal(dataset.x, x) and np.array_equal(dataset.y, y)
    for ours, theirs in (("train", "train"), ("val", "valid"), ("test", "test")):
        assert np.array_equal(dataset.split(ours), splits[theirs])


def test_arxiv_layout_converts_exactly(tmp_path, small_blocks):
    edges, x, y, splits = random_ogb()
    write_csv_ogb(tmp_path, "ogbn_arxiv", "time", edges, x, y, splits)
    dataset = convert_ogb("ogbn-arxiv", tmp_path)
    assert_converted(dataset, edges.T, x, y, splits)
    assert isinstance(dataset.x, np.memmap) and dataset.num_classes == 40
    assert load_dataset("ogbn-arxiv", root=tmp_path).graph.num_edges == len(edges)


def test_products_interleaves_the_inverse_edges_as_ogb_does(tmp_path, small_blocks):
    edges, x, y, splits = random_ogb(1)
    write_csv_ogb(tmp_path, "ogbn_products", "sales_ranking", edges, x, y, splits)
    dataset = convert_ogb("ogbn-products", tmp_path)
    interleaved = np.stack([edges.T, edges.T[::-1]], axis=2).reshape(2, -1)  # OGB's order
    assert_converted(dataset, interleaved, x, y, splits)


def test_papers100m_binary_layout(tmp_path, small_blocks):
    edges, x, y, splits = random_ogb(2)
    labels = y.astype(np.float64).reshape(-1, 1)
    # Unlabelled (as in OGB's file: only nodes of no split).
    labels[np.setdiff1d(np.arange(NUM_NODES), np.concatenate(list(splits.values())))] = np.nan
    write_papers_ogb(tmp_path, edges, x, labels, splits)
    dataset = convert_ogb("ogbn-papers100M", tmp_path)
    expected_y = np.where(np.isnan(labels[:, 0]), -1, y)
    x16 = x.astype(np.float16).astype(np.float32)
    assert_converted(dataset, edges.T, x16, expected_y, splits)


def test_malformed_rows_name_the_file_and_line(tmp_path, small_blocks):
    edges, x, y, splits = random_ogb()
    write_csv_ogb(tmp_path, "ogbn_arxiv", "time", edges, x, y, splits)
    edge_file = tmp_path / "ogbn_arxiv" / "raw" / "edge.csv.gz"
    lines = [f"{s},{d}" for s, d in edges]
    lines[99] = "17"
    write_gz(edge_file, lines)
    with pytest.raises(ValueError, match=r"edge.csv.gz', line 100: expected 2 int64 values"):
        convert_ogb("ogbn-arxiv", tmp_path)
    lines[99] = "17,x3"
    write_gz(edge_file, lines)
    with pytest.raises(ValueError, match=r"line 100: .*'17,x3'"):
        convert_ogb("ogbn-arxiv", tmp_path)
    lines[99] = f"17,{NUM_NODES}"
    write_gz(edge_file, lines)
    with pytest.raises(ValueError, match=f"holds node id {NUM_NODES}, outside"):
        convert_ogb("ogbn-arxiv", tmp_path)


def test_truncated_and_missing_files(tmp_path, small_blocks):
    edges, x, y, splits = random_ogb()
    write_csv_ogb(tmp_path, "ogbn_arxiv", "time", edges, x, y, splits)
    features = tmp_path / "ogbn_arxiv" / "raw" / "node-feat.csv.gz"
    features.write_bytes(features.read_bytes()[:-30])
    with pytest.raises(ValueError, match=r"node-feat.csv.gz' is corrupt or truncated"):
        convert_ogb("ogbn-arxiv", tmp_path)
    write_gz(features, [",".join(map(str, row)) for row in x[:-1]])
    with pytest.raises(ValueError, match=f"has {NUM_NODES - 1} rows, expected {NUM_NODES}"):
        convert_ogb("ogbn-arxiv", tmp_path)
    (tmp_path / "ogbn_arxiv" / "split" / "time" / "valid.csv.gz").unlink()
    with pytest.raises(FileNotFoundError, match=r"valid.csv.gz.*pip install ogb"):
        convert_ogb("ogbn-arxiv", tmp_path)
    with pytest.raises(FileNotFoundError, match=r"ogbn_products/raw/edge.csv.gz"):
        load_dataset("ogbn-products", root=tmp_path)


def test_convert_command(tmp_path, capsys):
    edges, x, y, splits = random_ogb()
    write_csv_ogb(tmp_path, "ogbn_arxiv", "time", edges, x, y, splits)
    assert main(["convert", "ogbn-arxiv", "--root", str(tmp_path)]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["path"] == str(tmp_path / "ogbn-arxiv") and summary["peak_rss_gb"] > 0
    assert main(["convert", "ogbn-arxiv", "--root", str(tmp_path)]) == 2  # exists
    assert main(["convert", "ogbn-arxiv", "--root", str(tmp_path), "--force"]) == 0


def test_convert_feature_dtype_float16_writes_the_features_rounded(tmp_path, capsys):
    """CSV features (read as float32) land as NumPy's astype(float16), the graph as with
    float32; a value beyond float16's range is refused, naming the file and the row."""
    edges, x, y, splits = random_ogb(3)
    write_csv_ogb(tmp_path, "ogbn_arxiv", "time", edges, x, y, splits)
    argv = ["convert", "ogbn-arxiv", "--root", str(tmp_path), "--feature-dtype", "float16"]
    assert main(argv) == 0
    dataset = load_dataset("ogbn-arxiv", root=tmp_path)
    assert dataset.x.dtype == np.float16
    assert_converted(dataset, edges.T, x.astype(np.float16), y, splits)
    x[17, 2] = 1e5
    write_csv_ogb(tmp_path / "big", "ogbn_arxiv", "time", edges, x, y, splits)
    with pytest.raises(ValueError, match=r"node-feat\.csv\.gz' row 17, column 2 holds 100000"):
        convert_ogb("ogbn-arxiv", tmp_path / "big", feature_dtype="float16")


def test_papers100m_half_features_stay_half_with_feature_dtype_float16(tmp_path, small_blocks):
    edges, x, y, splits = random_ogb(4)
    write_papers_ogb(tmp_path, edges, x, y.astype(np.float64).reshape(-1, 1), splits)
    dataset = convert_ogb("ogbn-papers100M", tmp_path, feature_dtype="float16")
    assert dataset.x.dtype == np.float16
    np.testing.assert_array_equal(dataset.x, x.astype(np.float16))
