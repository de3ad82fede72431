"""A dataset store renumbered for locality on disk, with the map back to the original ids.

Read from disk, a store costs a page (4 KiB) for every feature row or neighbor list a batch
touches that is not in the page cache. Neighbor sampling reaches a node about in proportion to
its in-degree, so a few nodes are read by most batches; in the original numbering they are
scattered, each sharing its page with rows nobody reads. ``"degree"`` order numbers nodes by
in-degree, highest first (ties by id), so the rows batches read most fill whole pages, and the
page cache (or a memory limit) holds more of what is read.

The renumbered store is written in chunks of new ids (per chunk: the old ids, their neighbor
lists read from the old store and mapped to new ids, their feature rows), so memory holds the
id maps (16 bytes a node) and one chunk. ``order.npy`` keeps the map: new node ``v`` is old node
``order[v]``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from tqdm import tqdm

from graphengine.data.format import (
    NpyWriter,
    array_listing,
    load_array,
    manifest_file,
    manifest_mapping,
    read_manifest,
)
from graphengine.data.graph_store import write_graph_manifest
from graphengine.datasets.dataset import (
    ARRAYS,
    FORMAT,
    FORMAT_VERSION,
    MANIFEST,
    GraphDataset,
    write_dataset_manifest,
)
from samplers import check_node_ids

ORDERS = ("degree",)
ORDER_FILE = "order.npy"
_CHUNK_NODES = 2**16


def locality_order(dataset: GraphDataset, order: str) -> np.ndarray:
    """int64 ``[num_nodes]``: the old id of each new id, for ``order`` (see the module)."""
    if order not in ORDERS:
        raise ValueError(f"'order' must be one of {ORDERS} (got {order!r})")
    return np.argsort(-dataset.graph.in_degree(), kind="stable")


def reorder_dataset(
    dataset: GraphDataset, out: str | Path, order: str = "degree", progress: bool = False
) -> GraphDataset:
    """Write ``dataset`` renumbered by ``order`` into ``out`` (the layout
    :meth:`GraphDataset.load` opens, plus ``order.npy``) and open it memory-mapped.

    Edges into a node keep their order; labels and features move with their nodes; each split
    holds the new ids of its nodes, sorted. Raises ``ValueError`` for an unknown ``order``
    or a graph with ``edge_ids``.
    """
    if dataset.graph.edge_ids is not None:
        raise ValueError("reordering keeps no edge ids: the graph must be in its CSC order")
    new_to_old = locality_order(dataset, order)
    n = dataset.num_nodes
    old_to_new = np.empty(n, dtype=np.int64)
    old_to_new[new_to_old] = np.arange(n)
    out = Path(out)
    (out / "graph").mkdir(parents=True, exist_ok=True)
    graph = dataset.graph
    degree = graph.in_degree()[new_to_old]
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(degree, out=indptr[1:])
    x = dataset.x
    with (
        NpyWriter(out / "graph" / "indices.npy", graph.indices.dtype, (graph.num_edges,)) as edges,
        NpyWriter(out / "x.npy", x.dtype, x.shape) as features,
    ):
        chunks = range(0, n, _CHUNK_NODES)
        for start in tqdm(chunks, desc=f"{order} order", disable=not progress):
            old = new_to_old[start : start + _CHUNK_NODES]
            first, last = graph.indptr[old], graph.indptr[old + 1]
            positions = np.repeat(first - np.cumsum(last - first) + (last - first), last - first)
            positions += np.arange(positions.shape[0])
            neighbors = old_to_new[np.asarray(graph.indices[positions])]
            edges.write(neighbors.astype(graph.indices.dtype).tobytes())
            features.write(np.ascontiguousarray(x[old]).tobytes())
    np.save(out / "graph" / "indptr.npy", indptr)
    write_graph_manifest(out / "graph", n, graph.num_edges, graph.indices.dtype)
    arrays = {
        "y": np.asarray(dataset.y)[new_to_old],
        **{
            f"{split}_idx": np.sort(old_to_new[np.asarray(dataset.split(split))])
            for split in ("train", "val", "test")
        },
    }
    np.save(out / ORDER_FILE, new_to_old)
    write_dataset_manifest(
        out,
        f"{dataset.name}-{order}",
        dataset.num_classes,
        arrays,
        (x.dtype.name, list(x.shape)),
        order={"policy": order, "file": ORDER_FILE},
    )
    return GraphDataset.load(out)


def original_ids(path: str | Path) -> np.ndarray | None:
    """The old id of each node of the store at ``path`` (``order.npy``, int64 ``[num_nodes]``,
    memory-mapped), or ``None`` for a store that was not renumbered.

    Raises ``ValueError`` naming ``dataset.json`` for a malformed ``order`` entry or one whose
    file leads outside the store, and naming the file when it does not hold one id a node, or
    holds an id outside ``[0, num_nodes)``.
    """
    path = Path(path)
    manifest_path = path / MANIFEST
    manifest = read_manifest(path, MANIFEST, FORMAT, FORMAT_VERSION, "dataset", ("arrays",))
    if "order" not in manifest:
        return None
    order = manifest_mapping(manifest, "order", manifest_path)
    if set(order) != {"policy", "file"} or order["policy"] not in ORDERS:
        raise ValueError(
            f"corrupt manifest '{manifest_path}': 'order' must be {{\"policy\": one of "
            f'{ORDERS}, "file": a file name}} (got {order!r})'
        )
    labels = array_listing(manifest, manifest_path, ARRAYS)["y"][1]  # one a node
    if len(labels) != 1:
        raise ValueError(
            f"corrupt manifest '{manifest_path}': 'arrays' entry 'y' must have shape "
            f"[num_nodes] (got {list(labels)})"
        )
    file = manifest_file(path, order["file"], manifest_path, "'order' entry 'file'")
    order = load_array(file, "int64", labels, mmap=True, manifest=manifest_path)
    check_node_ids(order, labels[0], str(file))  # callers index with it
    return order
