"""synthetic-papers: written in chunks to a store that opens memory-mapped, valid and exactly
reproducible, with the degrees and homophily it is drawn with, in memory bounded by a chunk."""

import json
import subprocess
import sys

import numpy as np
import pytest

from graphengine.cli import main
from graphengine.datasets import load_dataset
from graphengine.datasets.papers import PapersSpec, store_name, write_papers


@pytest.fixture(scope="module")
def papers(tmp_path_factory):
    return write_papers(PapersSpec(14), tmp_path_factory.mktemp("papers") / "s14")


def test_store_is_a_valid_memory_mapped_graph_with_its_spec(papers):
    spec = PapersSpec(14)
    n = spec.num_nodes
    graph = papers.graph.validate()
    assert graph.num_nodes == n and isinstance(graph.indices, np.memmap)
    assert papers.x.shape == (n, 128) and papers.x.dtype == np.float32
    assert isinstance(papers.x, np.memmap)
    assert papers.y.min() >= 0 and papers.y.max() < 172 and papers.num_classes == 172
    sizes = [len(papers.split(s)) for s in ("train", "val", "test")]
    assert sizes == [int(n * spec.train_fraction), int(n * spec.val_fraction), 31]
    splits = np.concatenate([papers.split(s) for s in ("train", "val", "test")])
    assert np.unique(splits).shape == splits.shape  # disjoint
    targets = np.repeat(np.arange(n), np.diff(graph.indptr))
    sources = np.asarray(graph.indices, dtype=np.int64)
    assert not (sources == targets).any()  # no self loops
    keys = targets * n + sources
    assert (np.diff(keys) > 0).all()  # sorted by destination, then source: no repeats
    degree = np.diff(graph.indptr)
    assert 0.8 * spec.mean_degree < degree.mean() < spec.mean_degree
    assert degree.max() > 20 * np.median(degree)  # a long tail
    same_class = (papers.y[sources] == papers.y[targets]).mean()
    assert same_class > spec.homophily * 0.9
    x = np.asarray(papers.x)
    centroid_distance = np.linalg.norm(x - x.mean(0), axis=1).mean()
    assert np.isfinite(x).all() and centroid_distance > spec.noise


def test_the_same_spec_gives_the_same_files(papers, tmp_path):
    again = write_papers(PapersSpec(14), tmp_path / "again")
    assert np.array_equal(again.graph.indptr, papers.graph.indptr)
    assert np.array_equal(again.graph.indices, papers.graph.indices)
    assert np.array_equal(again.x, papers.x) and np.array_equal(again.y, papers.y)
    other = write_papers(PapersSpec(14, seed=1), tmp_path / "other")
    assert not np.array_equal(other.graph.indptr, papers.graph.indptr)


def test_catalog_names_and_scale(tmp_path):
    by_name = load_dataset("synthetic-papers-s12", root=tmp_path)
    by_scale = load_dataset("synthetic-papers", root=tmp_path, scale=12)
    assert by_name.num_nodes == by_scale.num_nodes == 2**12
    assert (tmp_path / store_name(12) / "dataset.json").is_file()
    with pytest.raises(ValueError, match="'scale' sizes synthetic-papers only"):
        load_dataset("synthetic-small", root=tmp_path, scale=12)
    with pytest.raises(ValueError, match=r"'scale' must be in \[10, 30\] \(got 9\)"):
        PapersSpec(9)


def test_refuses_to_start_without_the_disk_it_needs(tmp_path):
    with pytest.raises(OSError, match="synthetic-papers at scale 30 needs about 6"):
        write_papers(PapersSpec(30), tmp_path / "huge")


def test_generate_command(tmp_path, capsys):
    assert main(["generate", "synthetic-papers", "--scale", "12", "--root", str(tmp_path)]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["path"] == str(tmp_path / "synthetic-papers-s12")
    assert summary["bytes"] > 2**12 * 128 * 4
    assert main(["generate", "cora", "--root", str(tmp_path)]) == 2
    with pytest.raises(SystemExit):
        main(["generate", "synthetic-small", "--scale", "12"])


MEMORY_PROBE = """
import sys
from pathlib import Path
import graphengine.datasets.papers as papers

def kib(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1])

papers.CHUNK_NODES = 2**12
papers.write_papers(papers.PapersSpec(12), Path(sys.argv[1]) / "warm-up")  # imports, allocator
papers.GraphDataset.load = lambda path: None  # its check maps the files: page cache, not heap
before = kib("VmRSS:")
open("/proc/self/clear_refs", "w").write("5")  # the peak starts again from here
papers.write_papers(papers.PapersSpec(int(sys.argv[2])), Path(sys.argv[1]) / "store")
print((kib("VmHWM:") - before) * 1024)
"""


def grown_and_stored(tmp_path, scale):
    """The peak memory generating 2^scale nodes added, and the store's bytes."""
    folder = tmp_path / f"s{scale}"
    done = subprocess.run(
        [sys.executable, "-c", MEMORY_PROBE, str(folder), str(scale)],
        capture_output=True,
        text=True,
        check=True,
    )
    store = sum(f.stat().st_size for f in (folder / "store").rglob("*") if f.is_file())
    return int(done.stdout.strip()), store


def test_generation_memory_grows_with_the_nodes_not_the_store(tmp_path):
    small_grown, small_store = grown_and_stored(tmp_path, 16)
    large_grown, large_store = grown_and_stored(tmp_path, 19)
    assert large_store - small_store > 250e6
    # Per-node arrays (35-65 bytes a node measured: the chunks in flight on the thread pool
    # and the allocator's arenas move it), not the store's ~600 bytes a node.
    assert large_grown - small_grown < 0.2 * (large_store - small_store), (
        small_grown,
        large_grown,
    )
