import os
from pathlib import Path

import pytest

import samplers.neighbor

SHARED = Path(os.environ.get("GRAPHENGINE_SHARED", Path(__file__).resolve().parents[2] / "shared"))
SHARED_DATASETS = SHARED / "datasets"


@pytest.fixture(params=["dense-ids", "hash-ids"])
def id_map(request, monkeypatch):
    """Both maps from node ids to batch-local ids in the samplers made under it: the array
    over all nodes that graphs this small get, and the hash table of larger graphs."""
    if request.param == "hash-ids":
        monkeypatch.setattr(samplers.neighbor, "DENSE_IDS_MAX_NODES", 0)
    return request.param


@pytest.fixture(scope="session")
def shared_datasets() -> Path:
    if not SHARED_DATASETS.is_dir():
        pytest.skip(f"real dataset files not found at {SHARED_DATASETS}")
    return SHARED_DATASETS
