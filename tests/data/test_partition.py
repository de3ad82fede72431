"""Partitioning: assignment, renumbering, the range partition book and the on-disk parts,
checked against brute-force references built from the original CSC."""

import builtins
import hashlib
import io
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from graphengine.data.graph_store import Graph
from graphengine.data.partition import (
    METHODS,
    PartitionBook,
    assign_parts,
    load_partition,
    open_part,
    partition_dataset,
    renumber,
)
from graphengine.data.partition.partitioner import symmetric_adjacency, vertex_weights
from graphengine.datasets.dataset import GraphDataset
from graphengine.datasets.synthetic import SyntheticSpec, generate
from tests.helpers.workers import partition_worker

COMMUNITY_SPEC = SyntheticSpec(
    num_nodes=1500,
    num_edges=24_000,
    num_features=6,
    num_classes=4,
    num_train=300,
    num_val=150,
    homophily=0.9,
)


@pytest.fixture(scope="module")
def multigraph() -> GraphDataset:
    """A directed multigraph: self loops, repeated edges, isolated nodes, and ``edge_ids``
    that are not the CSC order."""
    dataset = partition_worker.multigraph()
    assert dataset.graph.edge_ids is not None  # the fixture is what it says
    return dataset


@pytest.fixture(scope="module")
def community() -> GraphDataset:
    """A small homophilous graph (planted classes), with no ``edge_ids``."""
    return generate("community", COMMUNITY_SPEC)


def _original_edges(graph: Graph):
    """(source, destination, edge id, CSC position) of every edge, from the original CSC."""
    dst = np.repeat(np.arange(graph.num_nodes), np.diff(graph.indptr))
    src = np.asarray(graph.indices, dtype=np.int64)
    positions = np.arange(graph.num_edges)
    ids = positions if graph.edge_ids is None else np.asarray(graph.edge_ids)
    return src, dst, ids, positions


def _owner_by_loop(book: PartitionBook) -> np.ndarray:
    """The owner of every ORIGINAL node id, one part range at a time."""
    owner = np.full(book.num_nodes, -1)
    for p in range(book.num_parts):
        start, stop = int(book.bounds[p]), int(book.bounds[p + 1])
        owner[np.asarray(book.new_to_orig)[start:stop]] = p
    return owner


def _check_partition(dataset: GraphDataset, path, num_parts: int, stats: dict) -> None:
    graph = dataset.graph
    n = graph.num_nodes
    book = load_partition(path)
    bounds = book.bounds
    assert bounds.tolist()[0] == 0 and bounds[-1] == n and len(bounds) == num_parts + 1
    assert (np.diff(bounds) >= 0).all()
    new_to_orig, orig_to_new = np.asarray(book.new_to_orig), np.asarray(book.orig_to_new)
    np.testing.assert_array_equal(np.sort(new_to_orig), np.arange(n))  # a permutation
    np.testing.assert_array_equal(orig_to_new[new_to_orig], np.arange(n))
    np.testing.assert_array_equal(new_to_orig[orig_to_new], np.arange(n))

    owner = _owner_by_loop(book)
    assert (owner >= 0).all()  # every node owned exactly once (ranges are disjoint)
    np.testing.assert_array_equal(book.owner(orig_to_new), owner)

    src, dst, ids, positions = _original_edges(graph)
    ref_src = np.empty(graph.num_edges, dtype=np.int64)
    ref_dst = np.empty(graph.num_edges, dtype=np.int64)
    position_of_id = np.empty(graph.num_edges, dtype=np.int64)
    ref_src[ids], ref_dst[ids], position_of_id[ids] = src, dst, positions

    got_src, got_dst, got_ids, edges, train = [], [], [], [], []
    for p in range(num_parts):
        part = open_part(path, p)
        start, stop = book.part_range(p)
        assert (part.start, part.stop, part.num_nodes) == (start, stop, stop - start)
        local_degree = np.diff(part.indptr)
        part_dst = start + np.repeat(np.arange(part.num_nodes), local_degree)
        orig_nodes = new_to_orig[start:stop]
        # Each node's in-edges are its original ones, in their original CSC order.
        offsets = np.arange(part.num_edges) - np.repeat(part.indptr[:-1], local_degree)
        expected_positions = np.repeat(graph.indptr[orig_nodes], local_degree) + offsets
        np.testing.assert_array_equal(position_of_id[part.edge_ids], expected_positions)
        np.testing.assert_array_equal(local_degree, np.diff(graph.indptr)[orig_nodes])
        got_src.append(new_to_orig[np.asarray(part.indices, dtype=np.int64)])
        got_dst.append(new_to_orig[part_dst])
        got_ids.append(np.asarray(part.edge_ids))
        edges.append(part.num_edges)
        np.testing.assert_array_equal(part.x, dataset.x[orig_nodes])
        np.testing.assert_array_equal(part.y, dataset.y[orig_nodes])
        for split in ("train", "val", "test"):
            ids_new = getattr(part, f"{split}_idx")
            assert ((ids_new >= start) & (ids_new < stop)).all()
            assert (np.diff(ids_new) > 0).all()
        train.append(len(part.train_idx))
        assert isinstance(part.indices, np.memmap)

    got_src, got_dst, got_ids = map(np.concatenate, (got_src, got_dst, got_ids))
    np.testing.assert_array_equal(np.sort(got_ids), np.arange(graph.num_edges))  # once each
    np.testing.assert_array_equal(got_src, ref_src[got_ids])
    np.testing.assert_array_equal(got_dst, ref_dst[got_ids])
    # The (source, destination) multiset, compared directly.
    got_pairs = np.sort(got_src * n + got_dst)
    np.testing.assert_array_equal(got_pairs, np.sort(src * n + dst))

    for split in ("train", "val", "test"):
        union = np.concatenate(
            [getattr(open_part(path, p), f"{split}_idx") for p in range(num_parts)]
        )
        np.testing.assert_array_equal(np.sort(new_to_orig[union]), np.sort(dataset.split(split)))

    cut = int(np.count_nonzero(owner[src] != owner[dst]))
    assert stats["edge_cut"] == cut == book.manifest["edge_cut"]
    assert stats["edge_cut_share"] == pytest.approx(cut / graph.num_edges)
    assert stats["nodes"] == np.bincount(owner, minlength=num_parts).tolist()
    assert stats["edges"] == edges == np.bincount(owner[dst], minlength=num_parts).tolist()
    ref_train = np.bincount(owner[dataset.train_idx], minlength=num_parts)
    assert stats["train_nodes"] == train == ref_train.tolist()
    assert stats["balance"]["edges"] == pytest.approx(max(edges) / np.mean(edges), abs=1e-4)
    assert book.manifest["stats"] == stats
    assert book.manifest["num_nodes"] == n and book.manifest["num_edges"] == graph.num_edges


@pytest.mark.parametrize("method", ["metis", "random"])
@pytest.mark.parametrize("num_parts", [1, 2, 3])
@pytest.mark.parametrize("which", ["multigraph", "community"])
def test_partition_keeps_everything(request, tmp_path, which, num_parts, method):
    dataset = request.getfixturevalue(which)
    stats = partition_dataset(dataset, num_parts, tmp_path / "out", method=method)
    assert stats["method"] == method and stats["num_parts"] == num_parts
    assert stats["seconds"] > 0 and stats["peak_rss_bytes"] > 2**20
    _check_partition(dataset, tmp_path / "out", num_parts, stats)


def test_metis_cuts_fewer_edges_than_random(community, tmp_path):
    metis = partition_dataset(community, 4, tmp_path / "metis", method="metis")
    random = partition_dataset(community, 4, tmp_path / "random", method="random")
    # Random parts cut about (K - 1) / K of the edges; METIS follows the planted communities.
    assert random["edge_cut_share"] == pytest.approx(0.75, abs=0.03)
    assert metis["edge_cut"] < 0.7 * random["edge_cut"]
    # One combined vertex weight balances the three loads (measured 1.024, 1.16, 1.23 here;
    # a 1500-node graph with heavy-tailed degrees balances worse than a large one).
    assert metis["balance"]["nodes"] < 1.1, metis["balance"]
    assert metis["balance"]["train_nodes"] < 1.35, metis["balance"]
    assert metis["balance"]["edges"] < 1.35, metis["balance"]
    assert max(random["nodes"]) - min(random["nodes"]) <= 1  # exactly balanced


def test_random_is_seeded(community, tmp_path):
    for name, seed in (("a", 1), ("b", 1), ("c", 2)):
        partition_dataset(community, 3, tmp_path / name, method="random", seed=seed)
    maps = {name: np.asarray(load_partition(tmp_path / name).new_to_orig) for name in "abc"}
    np.testing.assert_array_equal(maps["a"], maps["b"])
    assert not np.array_equal(maps["a"], maps["c"])


def test_renumber_by_hand():
    new_to_orig, orig_to_new, bounds = renumber(np.array([1, 0, 1, 3, 0]), 4)
    assert new_to_orig.tolist() == [1, 4, 0, 2, 3]  # part by part, original order inside
    assert orig_to_new.tolist() == [2, 0, 3, 4, 1]
    assert bounds.tolist() == [0, 2, 4, 4, 5]  # part 2 is empty
    assert new_to_orig.dtype == orig_to_new.dtype == bounds.dtype == np.int64
    with pytest.raises(ValueError, match=r"'part' must hold values in \[0, 2\) \(got 2\)"):
        renumber(np.array([0, 2]), 2)


def test_book_owner_with_an_empty_part():
    book = PartitionBook(np.array([0, 2, 2, 5]), np.arange(5), np.arange(5))
    assert book.owner(np.arange(5)).tolist() == [0, 0, 2, 2, 2]
    assert book.num_parts == 3 and book.part_range(1) == (2, 2)
    with pytest.raises(ValueError, match=r"'new_ids' must be in \[0, 5\) \(got 5\)"):
        book.owner([1, 5])
    with pytest.raises(ValueError, match=r"'part' must be in \[0, 3\) \(got 3\)"):
        book.part_range(3)
    with pytest.raises(ValueError, match=r"'bounds' must rise from 0 to num_nodes=5"):
        PartitionBook(np.array([0, 3, 2, 5]), np.arange(5), np.arange(5))
    with pytest.raises(ValueError, match=r"'bounds' must be a 1-D int64 array"):
        PartitionBook(np.array([5]), np.arange(5), np.arange(5))
    with pytest.raises(ValueError, match=r"'orig_to_new' must have shape \[5\] \(got \(4,\)\)"):
        PartitionBook(np.array([0, 5]), np.arange(5), np.arange(4))


def test_book_refuses_ids_that_are_not_node_ids():
    book = PartitionBook(np.array([0, 2, 5]), np.array([4, 3, 2, 1, 0]), np.array([4, 3, 2, 1, 0]))
    assert book.to_new([0, 4]).tolist() == [4, 0]
    assert book.to_orig(np.array([[1], [3]], dtype=np.int32)).tolist() == [[3], [1]]
    with pytest.raises(ValueError, match=r"'orig_ids' must be in \[0, 5\) \(got -1\)"):
        book.to_new([-1])
    with pytest.raises(ValueError, match=r"'new_ids' must be in \[0, 5\) \(got 5\)"):
        book.to_orig([0, 5])
    with pytest.raises(TypeError, match=r"'new_ids' must be integer ids \(got float64"):
        book.to_orig([1.7])
    with pytest.raises(TypeError, match=r"'orig_ids' must be integer ids \(got float64"):
        book.to_new(np.array([1.0]))
    with pytest.raises(TypeError, match=r"'new_ids' must be integer ids \(got float64"):
        book.owner([1.7])
    assert book.to_new([]).tolist() == []


@pytest.mark.parametrize("method", METHODS)
def test_assign_parts_refuses_training_ids_outside_the_graph(multigraph, method):
    graph = multigraph.graph
    with pytest.raises(ValueError, match=r"'train_idx' must be in \[0, 300\) \(got -1\)"):
        assign_parts(graph, 2, method, train_idx=np.array([-1]))
    with pytest.raises(ValueError, match=r"'train_idx' must be in \[0, 300\) \(got 300\)"):
        assign_parts(graph, 2, method, train_idx=[0, 300])
    with pytest.raises(TypeError, match=r"'train_idx' must be integer ids \(got float64"):
        assign_parts(graph, 2, method, train_idx=np.array([0.5]))


def test_symmetric_adjacency_matches_dense(multigraph):
    graph = multigraph.graph
    n = graph.num_nodes
    src, dst, _, _ = _original_edges(graph)
    dense = np.zeros((n, n), dtype=bool)
    dense[src, dst] = True
    dense |= dense.T
    np.fill_diagonal(dense, False)
    xadj, adjncy = symmetric_adjacency(graph)
    assert xadj.dtype == adjncy.dtype == np.int64
    np.testing.assert_array_equal(np.diff(xadj), dense.sum(axis=1))
    for v in range(n):
        np.testing.assert_array_equal(np.sort(adjncy[xadj[v] : xadj[v + 1]]), dense[v].nonzero()[0])


def test_vertex_weights_sum_the_three_loads(multigraph):
    graph, train = multigraph.graph, multigraph.train_idx
    n, e = graph.num_nodes, graph.num_edges
    weights = vertex_weights(graph, train)
    is_train = np.isin(np.arange(n), train)
    reference = 1 + np.diff(graph.indptr) * n / e + is_train * n / len(train)
    np.testing.assert_allclose(weights / 16, reference, atol=0.5 / 16)
    assert weights.min() >= 1


@pytest.mark.parametrize(
    ("num_parts", "error", "match"),
    [
        (0, ValueError, r"'num_parts' must be in \[1, num_nodes=300\] \(got 0\)"),
        (301, ValueError, r"'num_parts' must be in \[1, num_nodes=300\] \(got 301\)"),
        (2.0, TypeError, r"'num_parts' must be an integer \(got float\)"),
    ],
)
def test_bad_num_parts(multigraph, tmp_path, num_parts, error, match):
    with pytest.raises(error, match=match):
        partition_dataset(multigraph, num_parts, tmp_path / "out")
    assert not (tmp_path / "out").exists()  # nothing written


def test_bad_method(multigraph, tmp_path):
    with pytest.raises(ValueError, match=r"'method' must be one of \('metis', 'random'\)"):
        partition_dataset(multigraph, 2, tmp_path / "out", method="kmeans")


def test_out_not_empty_needs_force(multigraph, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    with pytest.raises(ValueError, match=r"'out' directory .* is not empty \(got 1 entries"):
        partition_dataset(multigraph, 2, out)
    partition_dataset(multigraph, 3, out, method="random", force=True)  # part-2 too
    stats = partition_dataset(multigraph, 2, out, method="random", force=True)
    assert sorted(p.name for p in out.iterdir()) == [
        "new_to_orig.npy",
        "notes.txt",  # force removes only what a partition writes
        "orig_to_new.npy",
        "part-0",
        "part-1",
        "partition.json",
    ]
    _check_partition(multigraph, out, 2, stats)
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match=r"'out' must be a directory \(got the file"):
        partition_dataset(multigraph, 2, tmp_path / "file", force=True)


def test_force_removes_the_manifest_temporaries_a_killed_partition_left(multigraph, tmp_path):
    """A partition killed while writing its manifest leaves its temporary file (this
    version's ``partition.json.<pid>.<thread>.tmp``, an older one's ``partition.json.tmp``):
    the folder is then not empty, and --force removes them with the rest."""
    out = tmp_path / "out"
    out.mkdir()
    leftovers = [out / "partition.json.123.456.tmp", out / "partition.json.tmp"]
    for leftover in leftovers:
        leftover.write_text('{"format": ')
    with pytest.raises(ValueError, match=r"is not empty \(got 2 entries"):
        partition_dataset(multigraph, 2, out, method="random")
    stats = partition_dataset(multigraph, 2, out, method="random", force=True)
    assert not any(leftover.exists() for leftover in leftovers)
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]
    _check_partition(multigraph, out, 2, stats)


@pytest.fixture
def written(multigraph, tmp_path):
    out = tmp_path / "out"
    partition_dataset(multigraph, 2, out, method="random")
    return out


def test_missing_partition(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no partition at .*partition\.json"):
        load_partition(tmp_path)


def test_missing_part_file(written):
    (written / "part-1" / "edge_ids.npy").unlink()
    with pytest.raises(FileNotFoundError, match=r"missing partition file '.*part-1/edge_ids\.npy'"):
        load_partition(written)


def test_a_host_holding_only_its_part_opens_it(written):
    shutil.rmtree(written / "part-1")  # a cluster's host 0 holds only part 0
    assert load_partition(written).num_parts == 2
    assert open_part(written, 0).num_nodes > 0
    with pytest.raises(FileNotFoundError, match=r"missing partition file '.*part-1/"):
        open_part(written, 1, verify=False)


def test_truncated_part_file(written):
    path = written / "part-0" / "x.npy"
    path.write_bytes(path.read_bytes()[:-7])
    with pytest.raises(
        ValueError, match=r"truncated or mismatched partition file '.*part-0/x\.npy'"
    ):
        open_part(written, 1)  # any part: every file's size is checked


def test_corrupted_part_file(written):
    path = written / "part-1" / "indices.npy"
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # same size, one byte changed
    path.write_bytes(bytes(data))
    open_part(written, 0)  # another part's files are not hashed
    with pytest.raises(ValueError, match=r"corrupted partition file '.*part-1/indices\.npy'"):
        open_part(written, 1)
    # Opting out of the hash still checks the part's CSC, which this byte broke.
    with pytest.raises(ValueError, match=r"corrupt partition file '.*part-1/indices\.npy'"):
        open_part(written, 1, verify=False)


def test_corrupted_map(written):
    path = written / "new_to_orig.npy"
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"corrupted partition file '.*new_to_orig\.npy'"):
        load_partition(written)


def test_bad_part_index_and_version(written):
    with pytest.raises(ValueError, match=r"'part' must be in \[0, 2\) \(got 2\)"):
        open_part(written, 2)
    manifest = json.loads((written / "partition.json").read_text())
    manifest["version"] = 2
    (written / "partition.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match=r"is not a graphengine\.partition version 1 manifest"):
        load_partition(written)


def test_partition_command_writes_parts_and_prints_its_stats(tmp_path, capsys):
    from graphengine.cli import main

    out = tmp_path / "parts"
    assert (
        main(
            [
                "partition",
                "--root",
                str(tmp_path / "data"),
                "--parts",
                "2",
                "--out",
                str(out),
                "--method",
                "random",
            ]
        )
        == 0
    )
    stats = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert [stats[key] for key in ("dataset", "num_parts", "method")] == [
        "synthetic-small",
        2,
        "random",
    ]
    book = load_partition(out)
    assert book.num_parts == 2 and book.manifest["num_nodes"] == 8192
    assert stats["edge_cut"] == book.manifest["edge_cut"]
    again = ["partition", "--root", str(tmp_path / "data"), "--parts", "2", "--out", str(out)]
    assert main(again) == 2  # not empty, no --force
    assert main([*again, "--force"]) == 0


def test_manifest_without_files_names_the_key(written):
    manifest = json.loads((written / "partition.json").read_text())
    del manifest["files"]
    (written / "partition.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match=r"partition\.json.*'files'"):
        load_partition(written)


def _edit_part_array(out, name, edit):
    """Rewrite ``part-1/<name>.npy`` by ``edit`` and update its sha256 and size in the top-level
    manifest, as someone editing a part on purpose would: only the part's own check sees it."""
    path = out / "part-1" / f"{name}.npy"
    array = np.load(path)
    edit(array)
    np.save(path, array)
    manifest = json.loads((out / "partition.json").read_text())
    entry = manifest["files"][f"part-1/{name}.npy"]
    entry["bytes"] = path.stat().st_size
    entry["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    (out / "partition.json").write_text(json.dumps(manifest))


def _set(at, value):
    def edit(array):
        array[at] = value

    return edit


@pytest.mark.parametrize(
    ("name", "edit", "message"),
    [
        ("indices", _set(0, -5), r"indices\.npy'.*source -5, outside \[0, \d+\)"),
        ("indices", _set(-1, 10**6), r"indices\.npy'.*source 1000000, outside \[0, \d+\)"),
        ("indptr", _set(2, 10**6), r"indptr\.npy'.*must not decrease \(got 1000000 then"),
        ("indptr", _set(-1, 3), r"indptr\.npy'.*must start at 0 and end at \d+.*got 0 and 3"),
        ("edge_ids", _set(1, -2), r"edge_ids\.npy'.*edge id -2, outside \[0, \d+\)"),
    ],
    ids=["negative-source", "source-past-the-graph", "falling-indptr", "indptr-end", "edge-id"],
)
def test_an_edited_part_with_a_matching_sha256_is_refused_by_name(written, name, edit, message):
    _edit_part_array(written, name, edit)
    open_part(written, 0)  # another part is untouched
    with pytest.raises(ValueError, match=rf"corrupt partition file '.*part-1/{message}"):
        open_part(written, 1)


# -- Untrusted partitions: names stay inside the partition, fields are checked ---------------


def _edit_manifest(out, **changes):
    manifest = json.loads((out / "partition.json").read_text())
    manifest.update(changes)
    (out / "partition.json").write_text(json.dumps(manifest))
    return manifest


def _entry(path):
    return {"bytes": path.stat().st_size, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


@pytest.mark.parametrize("name", ["/etc/hostname", "part-0/../../secret.npy", "..", "part-9"])
def test_a_files_entry_outside_the_partition_is_refused_before_it_is_touched(
    written, name, monkeypatch
):
    secret = written.parent / "secret.npy"
    secret.write_bytes(b"secret")
    (written / "part-9").symlink_to(secret)
    files = json.loads((written / "partition.json").read_text())["files"]
    # With the right size and sha256, the old reader hashed the file and said nothing:
    # a guessed sha256 confirmed a file's content.
    _edit_manifest(written, files={**files, name: _entry(secret)})
    touched = []
    monkeypatch.setattr(Path, "stat", lambda self, **kw: touched.append(self) or os.stat(self))
    with pytest.raises(ValueError, match=rf"partition\.json'.*'files' entry {name!r}"):
        open_part(written, 0)
    assert [path for path in touched if not path.is_relative_to(written)] == []


def test_a_part_file_linked_outside_the_partition_is_refused(written):
    outside = written.parent / "x.npy"
    (written / "part-0" / "x.npy").rename(outside)
    (written / "part-0" / "x.npy").symlink_to(outside)
    with pytest.raises(ValueError, match=r"partition\.json'.*'part-0/x\.npy'.*leads outside"):
        load_partition(written)


def test_a_part_array_named_outside_its_folder_is_refused(written):
    part_json = written / "part-0" / "part.json"
    fields = json.loads(part_json.read_text())
    fields["arrays"]["../x"] = fields["arrays"].pop("x")
    part_json.write_text(json.dumps(fields))
    files = json.loads((written / "partition.json").read_text())["files"]
    _edit_manifest(written, files={**files, "part-0/part.json": _entry(part_json)})
    with pytest.raises(ValueError, match=r"part\.json'.*'arrays' lists \['\.\./x'"):
        open_part(written, 0)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"files": ["new_to_orig.npy"]}, r"'files' must be a JSON object"),
        ({"files": {"new_to_orig.npy": 5}}, r"'files' entry 'new_to_orig\.npy' must be"),
        ({"files": {"new_to_orig.npy": {"bytes": -1, "sha256": "0" * 64}}}, r"must be \{"),
        ({"files": {"new_to_orig.npy": {"bytes": 8, "sha256": "zz"}}}, r"must be \{"),
        ({"files": {}}, r"'files' lists no 'new_to_orig\.npy'"),
        ({"bounds": [0, 99999]}, r"'bounds' must be 3 integers.*rising from 0"),
        ({"bounds": "0,1"}, r"'bounds' must be 3 integers"),
        ({"bounds": [0, -1, None]}, r"'bounds' must be 3 integers"),
        ({"num_parts": 0}, r"'num_parts' must be an integer >= 1 \(got 0\)"),
        ({"num_parts": 3}, r"'bounds' must be 4 integers"),
        ({"num_nodes": "60"}, r"'num_nodes' must be a non-negative integer \(got '60'\)"),
        ({"num_classes": None}, r"'num_classes' must be an integer >= 1 \(got None\)"),
        ({"num_features": -2}, r"'num_features' must be a non-negative integer"),
        ({"dataset": ["d"]}, r"'dataset' must be a non-empty string"),
        ({"stats": 1}, r"'stats' must be a JSON object"),
    ],
)
def test_a_malformed_partition_field_is_named(written, change, message):
    _edit_manifest(written, **change)
    with pytest.raises(ValueError, match=rf"partition\.json'.*{message}"):
        open_part(written, 0)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"start": "0"}, r"'start' must be a non-negative integer"),
        ({"part": None}, r"'part' must be a non-negative integer"),
        ({"num_edges": -1}, r"'num_edges' must be a non-negative integer"),
        ({"num_edges": 10**9}, r"'num_edges' is 1000000000, but 'arrays' lists indices"),
        ({"arrays": []}, r"'arrays' must be a JSON object"),
    ],
)
def test_a_part_manifest_with_a_malformed_field_is_named(written, change, message):
    part_json = written / "part-1" / "part.json"
    fields = json.loads(part_json.read_text())
    part_json.write_text(json.dumps({**fields, **change}))
    files = json.loads((written / "partition.json").read_text())["files"]
    _edit_manifest(written, files={**files, "part-1/part.json": _entry(part_json)})
    with pytest.raises(ValueError, match=rf"part\.json'.*{message}"):
        open_part(written, 1)


def _rewrite_part_x(out, part, x):
    """Replace ``part-<part>/x.npy`` by ``x``, with part.json and partition.json updated to
    match, as a part written from another dataset would be."""
    directory = out / f"part-{part}"
    np.save(directory / "x.npy", x)
    fields = json.loads((directory / "part.json").read_text())
    fields["arrays"]["x"] = [x.dtype.name, list(x.shape)]
    (directory / "part.json").write_text(json.dumps(fields))
    files = json.loads((out / "partition.json").read_text())["files"]
    for name in ("x.npy", "part.json"):
        files[f"part-{part}/{name}"] = _entry(directory / name)
    _edit_manifest(out, files=files)


def test_a_part_of_another_feature_width_is_refused_naming_the_file(written):
    x = np.load(written / "part-1" / "x.npy")
    _rewrite_part_x(written, 1, np.zeros((x.shape[0], x.shape[1] + 3), np.float32))
    open_part(written, 0)
    with pytest.raises(
        ValueError,
        match=rf"part-1/x\.npy' holds {x.shape[1] + 3} features a node.*expected {x.shape[1]}",
    ):
        open_part(written, 1)


def test_part_features_that_are_not_float32_are_refused_naming_the_file(written):
    x = np.load(written / "part-1" / "x.npy")
    _rewrite_part_x(written, 1, x.astype(np.float64))
    with pytest.raises(ValueError, match=r"part-1/x\.npy' holds float64 features.*float32"):
        open_part(written, 1)


def test_a_fifo_partition_file_is_named_and_never_opened(written):
    (written / "part-1" / "y.npy").unlink()
    os.mkfifo(written / "part-1" / "y.npy")
    with pytest.raises(ValueError, match=r"part-1/y\.npy' \(listed in '.*\.json'\) is a FIFO"):
        load_partition(written)


def test_a_part_folder_linked_outside_and_left_unlisted_is_not_read(written, monkeypatch):
    outside = written.parent / "elsewhere"
    (written / "part-0").rename(outside)
    (written / "part-0").symlink_to(outside)
    files = json.loads((written / "partition.json").read_text())["files"]
    _edit_manifest(written, files={k: v for k, v in files.items() if not k.startswith("part-0/")})
    opened = []
    for module in (builtins, io):
        original = module.open
        monkeypatch.setattr(
            module,
            "open",
            lambda file, *a, _open=original, **kw: opened.append(file) or _open(file, *a, **kw),
        )
    with pytest.raises(ValueError, match=r"partition\.json'.*'files' lists no 'part-0/part\.json'"):
        open_part(written, 0)
    assert [f for f in opened if "part-0" in str(f)] == []


@pytest.mark.parametrize("seed", [-1, 2**31, 2**32])
def test_a_metis_seed_past_what_metis_keeps_is_refused(community, seed):
    """METIS keeps 32 bits of its seed: 2^32 gave seed 0's parts."""
    with pytest.raises(
        ValueError, match=rf"'seed' of METIS must be in \[0, 2\^31 - 1\] \(got {seed}"
    ):
        assign_parts(community.graph, 2, seed=seed)
