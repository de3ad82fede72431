"""``graphengine train`` without ``--access``: a store whose memory-mapped arrays take more
than half of the memory the process may use is read without read-ahead, and the log says
which access was chosen and why."""

import pytest

from graphengine.cli.train_data import default_access
from graphengine.datasets import GraphDataset, load_dataset


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    load_dataset("synthetic-small", root=root).save(root / "saved")
    return GraphDataset.load(root / "saved", mmap=False), GraphDataset.load(root / "saved")


def mapped_bytes(dataset) -> int:
    return dataset.x.nbytes + dataset.graph.indices.nbytes + dataset.graph.indptr.nbytes


def test_a_store_larger_than_half_the_limit_is_read_at_random(stores):
    _, mapped = stores
    size = mapped_bytes(mapped)
    access, why = default_access(mapped, limit=2 * size - 1)
    assert access == "random"
    assert "more than half" in why and f"{size / (1 << 30):.2f} GiB" in why
    assert default_access(mapped, limit=2 * size) == (
        "normal",
        f"its memory-mapped arrays take {size / (1 << 30):.2f} GiB of the "
        f"{2 * size / (1 << 30):.2f} GiB this process may use (at most half; --access to "
        "choose)",
    )


def test_a_store_in_memory_or_an_unknown_limit_keeps_read_ahead(stores):
    in_memory, mapped = stores
    assert default_access(in_memory, limit=1)[0] == "normal"
    assert default_access(mapped, limit=None) == (
        "normal",
        "this process's memory limit is unknown",
    )
