"""Cluster-GCN's ClusterData and ClusterLoader against brute-force references, on graphs whose
node features are node ids and edge attributes edge ids."""

import logging
import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch_geometric.data import Data
from torch_geometric.loader.cluster import ClusterData as PyGClusterData
from torch_geometric.loader.cluster import ClusterLoader as PyGClusterLoader
from torch_geometric.loader.cluster import Partition as PyGPartition

from graphengine.loader.cluster import ClusterData, ClusterLoader
from tests.helpers.damage import flip_or_cut
from tests.helpers.special_files import tmpfs


def communities(num_nodes=240, num_groups=6, seed=0) -> Data:
    """Planted groups (most edges inside a group), with self loops and repeated edges."""
    rng = np.random.default_rng(seed)
    group = np.arange(num_nodes) % num_groups
    src = rng.integers(0, num_nodes, 3000)
    inside = rng.random(3000) < 0.9
    same = rng.integers(0, num_nodes // num_groups, 3000) * num_groups + group[src]
    dst = np.where(inside, same, rng.integers(0, num_nodes, 3000))
    dst[:20] = src[:20]  # self loops
    src[20:40], dst[20:40] = src[40:60], dst[40:60]  # repeated edges
    edge_index = torch.from_numpy(np.stack([src, dst]))
    return Data(
        x=torch.arange(num_nodes, dtype=torch.float32).view(-1, 1),
        y=torch.from_numpy(group),
        edge_index=edge_index,
        edge_attr=torch.arange(edge_index.shape[1]),
        num_nodes=num_nodes,
    )


def brute_force_batch(data: Data, cluster_nodes: list[np.ndarray]):
    """The batch's original node ids, in order, and the multiset of its edges as
    (original source, original destination, edge id)."""
    nodes = np.concatenate(cluster_nodes)
    inside = np.zeros(data.num_nodes, dtype=bool)
    inside[nodes] = True
    src, dst = data.edge_index.numpy()
    keep = inside[src] & inside[dst]
    return nodes, sorted(zip(src[keep], dst[keep], np.flatnonzero(keep), strict=True))


def batch_edges(batch, nodes):
    src, dst = batch.edge_index.numpy()
    ids = batch.edge_attr.numpy()
    return sorted(zip(nodes[src], nodes[dst], ids, strict=True))


@pytest.mark.parametrize("sparse_format", ["csr", "csc"])
def test_cluster_batches_hold_the_clusters_nodes_and_every_edge_between_them(sparse_format):
    data = communities()
    clusters = ClusterData(data, num_parts=8, log=False, sparse_format=sparse_format)
    p = clusters.partition
    assert sorted(p.node_perm.tolist()) == list(range(data.num_nodes))
    assert p.partptr[0] == 0 and p.partptr[-1] == data.num_nodes and len(clusters) == 8
    assert torch.equal(clusters.data.x.view(-1).long(), torch.from_numpy(p.node_perm))
    new_id = np.argsort(p.node_perm)  # original id -> renumbered id
    loader = ClusterLoader(clusters, batch_size=3, shuffle=True, seed=0)
    seen = []
    for batch in loader:
        nodes = batch.x.view(-1).long().numpy()
        assert batch.num_nodes == nodes.size
        # The nodes are whole clusters, one after another.
        chosen = []
        start = 0
        while start < nodes.size:
            c = int(np.searchsorted(p.partptr, new_id[nodes[start]], side="right")) - 1
            members = p.node_perm[p.partptr[c] : p.partptr[c + 1]]
            np.testing.assert_array_equal(nodes[start : start + members.size], members)
            chosen.append(c)
            start += members.size
        seen += chosen
        expected_nodes, expected_edges = brute_force_batch(
            data, [p.node_perm[p.partptr[c] : p.partptr[c + 1]] for c in chosen]
        )
        np.testing.assert_array_equal(nodes, expected_nodes)
        assert batch_edges(batch, nodes) == expected_edges
        assert torch.equal(batch.y, data.y[torch.from_numpy(nodes)])
    assert sorted(seen) == list(range(8))  # each cluster once an epoch


def test_single_cluster_keeps_or_drops_the_edges_leaving_it():
    data = communities(seed=1)
    inner = ClusterData(data, num_parts=4, log=False)
    both = ClusterData(data, num_parts=4, log=False, keep_inter_cluster_edges=True)
    p = inner.partition
    for c in range(4):
        part = inner[c]
        nodes = p.node_perm[p.partptr[c] : p.partptr[c + 1]]
        _, expected = brute_force_batch(data, [nodes])
        assert batch_edges(part, nodes) == expected
        # With the edges leaving it: every edge out of the cluster ('csr' groups by source),
        # the far ends as renumbered ids, as PyG gives them.
        kept = both[c]
        src = data.edge_index[0].numpy()
        assert kept.num_edges == int(np.isin(src, nodes).sum())
        assert torch.equal(
            kept.edge_index[0].unique(), torch.arange(int(kept.edge_index[0].max()) + 1)
        )


def test_metis_clusters_cut_fewer_edges_than_random_ones():
    data = communities(seed=2)
    clusters = ClusterData(data, num_parts=6, log=False)
    p = clusters.partition
    cluster_of = np.empty(data.num_nodes, dtype=np.int64)
    cluster_of[p.node_perm] = np.repeat(np.arange(6), np.diff(p.partptr))
    src, dst = data.edge_index.numpy()
    metis_cut = np.mean(cluster_of[src] != cluster_of[dst])
    random_cut = np.mean(
        np.random.default_rng(0).integers(0, 6, data.num_nodes)[src] != cluster_of[dst]
    )
    assert metis_cut < 0.5 * random_cut


def test_clusters_are_cached_under_save_dir(tmp_path):
    data = communities(seed=3)
    first = ClusterData(data, num_parts=5, save_dir=tmp_path, log=False)
    (cached,) = (tmp_path / "part_5").glob("*/metis.npz")
    again = ClusterData(data, num_parts=5, save_dir=tmp_path, log=False)
    np.testing.assert_array_equal(first.partition.node_perm, again.partition.node_perm)
    # Read, not computed again: clusters of the right shape and range are taken as they are.
    np.savez(cached, cluster=np.arange(240) % 5, num_nodes=240)
    given_clusters = ClusterData(data, num_parts=5, save_dir=tmp_path, log=False)
    expected = np.argsort(np.arange(240) % 5, kind="stable")
    np.testing.assert_array_equal(given_clusters.partition.node_perm, expected)


def test_a_cache_dir_on_a_read_only_disk_costs_the_cache_not_the_run(tmp_path, caplog):
    data = communities(seed=3)
    fresh = ClusterData(data, num_parts=5, log=False)
    with tmpfs(tmp_path / "ro", read_only=True) as read_only, caplog.at_level(logging.WARNING):
        cached = ClusterData(data, num_parts=5, save_dir=read_only, log=False)
    np.testing.assert_array_equal(cached.partition.node_perm, fresh.partition.node_perm)
    assert "metis.npz': cannot write it (Read-only file system)" in caplog.text


class Calls:
    """Pickles as a call of ``function(*args)``, which unpickling it makes."""

    def __init__(self, function, *args):
        self.function, self.args = function, args

    def __reduce__(self):
        return self.function, self.args


def damaged_caches(cached, marker):
    """Ways the cache file ``cached`` (of 240 nodes, 5 clusters) can be wrong, by name."""
    clusters = np.load(cached)["cluster"]
    good = cached.read_bytes()
    flipped = bytearray(good)
    flipped[len(good) // 3] ^= 0xFF  # in the clusters' bytes: the zip's CRC no longer matches
    return {
        "flipped byte": bytes(flipped),
        "truncated": good[: len(good) // 2],
        "not a zip": b"not an npz",
        "a .npy": {"npy": clusters},
        "other arrays": {"parts": clusters, "num_nodes": 240},
        "short": {"cluster": clusters[:-1], "num_nodes": 240},
        "floats": {"cluster": clusters + 0.5, "num_nodes": 240},
        "out of range": {"cluster": np.full(240, 5), "num_nodes": 240},
        "negative": {"cluster": np.full(240, -1), "num_nodes": 240},
        "another graph's": {"cluster": clusters, "num_nodes": 241},
        "pickled objects": {
            "cluster": np.array([Calls(os.system, f"touch {marker}")] * 240),
            "num_nodes": 240,
        },
    }


def write_damage(cached, damage) -> None:
    if isinstance(damage, bytes):
        cached.write_bytes(damage)
    elif "npy" in damage:
        with cached.open("wb") as f:
            np.save(f, damage["npy"])
    else:
        with cached.open("wb") as f:
            np.savez(f, **damage)


@pytest.mark.parametrize(
    "name",
    [
        "flipped byte",
        "truncated",
        "not a zip",
        "a .npy",
        "other arrays",
        "short",
        "floats",
        "out of range",
        "negative",
        "another graph's",
        "pickled objects",
    ],
)
def test_damaged_cluster_cache_is_computed_again_and_overwritten(tmp_path, caplog, name):
    data = communities(seed=3)
    fresh = ClusterData(data, num_parts=5, log=False)
    ClusterData(data, num_parts=5, save_dir=tmp_path / "cache", log=False)
    (cached,) = (tmp_path / "cache" / "part_5").glob("*/metis.npz")
    marker = tmp_path / "ran"
    write_damage(cached, damaged_caches(cached, marker)[name])
    with caplog.at_level(logging.WARNING):
        redone = ClusterData(data, num_parts=5, save_dir=tmp_path / "cache", log=False)
    assert f"cache file '{cached}' is not usable" in caplog.text
    assert not marker.exists()
    np.testing.assert_array_equal(redone.partition.node_perm, fresh.partition.node_perm)
    np.testing.assert_array_equal(redone.partition.index, fresh.partition.index)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        ClusterData(data, num_parts=5, save_dir=tmp_path / "cache", log=False)
    assert not caplog.text  # overwritten with the clusters computed again


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_any_flipped_or_cut_cluster_cache_gives_the_graphs_clusters(data):
    """Whatever byte is flipped, or wherever the file is cut, the clusters are this graph's
    (read back when the damage left them whole, else computed again) and the cache reads back."""
    graph = communities(seed=5)
    fresh = ClusterData(graph, num_parts=4, log=False)
    with tempfile.TemporaryDirectory() as save_dir:
        ClusterData(graph, num_parts=4, save_dir=save_dir, log=False)
        (cached,) = Path(save_dir, "part_4").glob("*/metis.npz")
        flip_or_cut(cached, data)
        again = ClusterData(graph, num_parts=4, save_dir=save_dir, log=False)
        np.testing.assert_array_equal(again.partition.node_perm, fresh.partition.node_perm)
        with np.load(cached, allow_pickle=False) as saved:
            assert saved["cluster"].shape == (graph.num_nodes,)


def test_cluster_cache_is_keyed_by_the_graph_and_the_arguments(tmp_path):
    """Another graph of the same node count, or other arguments, reused the first one's
    clusters: each gets its own cache file and its own METIS clusters."""
    data, other = communities(seed=3), communities(seed=4)
    assert data.num_nodes == other.num_nodes
    ClusterData(data, num_parts=5, save_dir=tmp_path, log=False)
    fresh = ClusterData(other, num_parts=5, save_dir=tmp_path / "fresh", log=False)
    reused = ClusterData(other, num_parts=5, save_dir=tmp_path, log=False)
    np.testing.assert_array_equal(reused.partition.node_perm, fresh.partition.node_perm)
    ClusterData(data, num_parts=5, save_dir=tmp_path, log=False, seed=1)
    ClusterData(data, num_parts=5, save_dir=tmp_path, log=False, recursive=True)
    ClusterData(data, num_parts=4, save_dir=tmp_path, log=False)
    files = sorted(tmp_path.glob("part_*/*/metis.npz"))
    assert len(files) == 5 and len({path.parent.name for path in files}) == 5
    again = ClusterData(data, num_parts=5, save_dir=tmp_path, log=False, seed=1)
    assert len(list(tmp_path.glob("part_*/*/metis.npz"))) == 5
    assert again.num_parts == 5


def test_loader_order_threads_and_bad_arguments():
    data = communities(seed=4)
    clusters = ClusterData(data, num_parts=6, log=False)
    inline = [b.x for b in ClusterLoader(clusters, batch_size=2, shuffle=True, seed=7)]
    threaded = [
        b.x for b in ClusterLoader(clusters, batch_size=2, shuffle=True, seed=7, num_workers=2)
    ]
    assert all(torch.equal(a, b) for a, b in zip(inline, threaded, strict=True))
    loader = ClusterLoader(clusters, batch_size=4, drop_last=True)
    assert len(loader) == 1 and repr(loader) == "ClusterLoader()"
    assert torch.equal(loader([1, 0]).x, torch.cat([clusters[1].x, clusters[0].x]))
    with pytest.raises(ValueError, match=r"cluster ids must be .* \[0, 6\)"):
        loader([6])
    with pytest.raises(TypeError, match="does not support"):
        ClusterLoader(clusters, sampler=None)
    with pytest.raises(ValueError, match="'num_parts' must be in"):
        ClusterData(data, num_parts=0)
    with pytest.raises(ValueError, match="'sparse_format' must be one of"):
        ClusterData(data, num_parts=2, sparse_format="coo")


def test_cluster_ids_must_be_integers():
    clusters = ClusterData(communities(seed=4), num_parts=6, log=False)
    loader = ClusterLoader(clusters, batch_size=2)
    with pytest.raises(TypeError, match=r"cluster ids must be integers \(got float64: \[1.7\]\)"):
        loader([1.7])
    with pytest.raises(TypeError, match=r"cluster ids must be integers \(got float32"):
        loader(torch.tensor([1.0]))
    with pytest.raises(TypeError, match=r"'idx' must be an integer cluster id \(got 1.5\)"):
        clusters[1.5]
    with pytest.raises(TypeError, match=r"'idx' must be an integer cluster id \(got True\)"):
        clusters[True]
    assert torch.equal(clusters[np.int64(2)].x, clusters[2].x)
    assert torch.equal(loader(np.array([2], dtype=np.int32)).x, clusters[2].x)
    assert torch.equal(loader(torch.tensor([2])).x, clusters[2].x)
    with pytest.raises(
        ValueError, match=r"non-empty 1-D list of distinct ids in \[0, 6\) \(got \[\]\)"
    ):
        loader([])
    with pytest.raises(ValueError, match=r"distinct ids in \[0, 6\) \(got \[2, 2\]\)"):
        loader([2, 2])


@pytest.mark.parametrize("sparse_format", ["csr", "csc"])
@pytest.mark.parametrize("keep", [False, True], ids=["inner", "keep-inter"])
def test_batches_equal_pygs_for_the_same_clusters(sparse_format, keep):
    """PyG's own ClusterLoader._collate and ClusterData.__getitem__ (plain torch, no backend)
    on our partition give field-for-field the same batches."""
    data = communities(seed=5)
    ours = ClusterData(
        data, num_parts=7, log=False, sparse_format=sparse_format, keep_inter_cluster_edges=keep
    )
    p = ours.partition
    theirs = object.__new__(PyGClusterData)  # skip PyG's METIS: use our clusters
    theirs.num_parts, theirs.recursive = 7, False
    theirs.keep_inter_cluster_edges, theirs.sparse_format = keep, sparse_format
    theirs.partition = PyGPartition(
        *(torch.from_numpy(a) for a in (p.indptr, p.index, p.partptr, p.node_perm, p.edge_perm)),
        sparse_format,
    )
    theirs.data = theirs._permute_data(data, theirs.partition)
    pyg_loader = PyGClusterLoader(theirs, batch_size=3)
    for clusters in ([2, 5, 0], [6], [1, 3, 4, 6]):
        mine, reference = ClusterLoader(ours)(clusters), pyg_loader._collate(clusters)
        for key in ("x", "y", "edge_attr", "edge_index"):
            assert torch.equal(mine[key], reference[key]), key
        assert mine.num_nodes == reference.num_nodes
    for c in range(7):
        for key in ("x", "y", "edge_attr", "edge_index"):
            assert torch.equal(ours[c][key], theirs[c][key]), (c, key)


def test_loader_device():
    cluster_data = ClusterData(communities(), num_parts=6, log=False)
    on_cpu = next(iter(ClusterLoader(cluster_data, batch_size=2, seed=1, device="cpu")))
    default = next(iter(ClusterLoader(cluster_data, batch_size=2, seed=1)))
    assert torch.equal(on_cpu.edge_index, default.edge_index)
    with pytest.raises(ValueError, match="'device' must be a torch device"):
        ClusterLoader(cluster_data, device="gpu:0")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="needs CUDA"):
            ClusterLoader(cluster_data, device="cuda")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_loader_copies_batches_to_cuda():
    cluster_data = ClusterData(communities(), num_parts=6, log=False)
    default = next(iter(ClusterLoader(cluster_data, batch_size=2, seed=1)))
    loader = ClusterLoader(cluster_data, batch_size=2, seed=1, device="cuda", num_workers=1)
    batch = next(iter(loader))
    assert batch.x.is_cuda and batch.edge_index.is_cuda
    assert torch.equal(batch.edge_index.cpu(), default.edge_index)
