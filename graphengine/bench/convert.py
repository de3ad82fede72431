"""``graphengine bench convert``: ``graphengine convert`` on OGB-format files of ogbn-products'
size, written here (random graph, features and labels in OGB's file names, columns and gzip
compression), timed in a fresh process with its peak memory.

The files are made once under ``<root>/ogbn_products`` (about 1.5 GB compressed at products'
size) and reused: ids zero-padded and features as signed decimals with six digits, made by
vectorized digit arithmetic (formatting 245M floats one by one takes many minutes), gzip level 1.
"""

from __future__ import annotations

import gzip
import json
import logging
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from graphengine.bench.report import print_report

log = logging.getLogger(__name__)

PRODUCTS = {"nodes": 2_449_029, "edges": 61_859_140, "features": 100, "classes": 47}
_ROWS_PER_BLOCK = 2**16


def run(root: str | Path, nodes: int, edges: int, features: int, seed: int = 0) -> dict:
    """Write the files (unless there for these sizes), convert them in a fresh process, and
    print the seconds, its peak resident memory (and what importing graphengine and torch
    alone takes), and the sizes; returns the summary."""
    root = Path(root)
    raw = root / "ogbn_products" / "raw"
    sizes = {"nodes": nodes, "edges": edges, "features": features, "seed": seed}
    marker = root / "ogbn_products" / "sizes.json"
    if not marker.is_file() or json.loads(marker.read_text()) != sizes:
        shutil.rmtree(root / "ogbn_products", ignore_errors=True)
        start = time.perf_counter()
        write_products_like(root / "ogbn_products", nodes, edges, features, seed)
        marker.write_text(json.dumps(sizes))
        log.info("wrote OGB-format files in %.0f s", time.perf_counter() - start)
    shutil.rmtree(root / "ogbn-products", ignore_errors=True)
    code = (
        "import json, resource, sys, time\n"
        "from graphengine.datasets.ogb import convert_ogb\n"
        "status = open('/proc/self/status').read().split('VmRSS:')[1]\n"
        "imported = int(status.split()[0]) * 1024\n"
        "start = time.perf_counter()\n"
        "dataset = convert_ogb('ogbn-products', sys.argv[1])\n"
        "seconds = time.perf_counter() - start\n"
        "peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024\n"
        "print(json.dumps({'seconds': seconds, 'peak_rss_bytes': peak, 'imported': imported,"
        " 'num_edges': dataset.graph.num_edges}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(root)], capture_output=True, text=True, check=True
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    compressed = sum(f.stat().st_size for f in raw.glob("*.gz"))
    store = sum(f.stat().st_size for f in (root / "ogbn-products").rglob("*") if f.is_file())
    summary = {
        "bench": "convert",
        **sizes,
        "stored_edges": result["num_edges"],
        "seconds": result["seconds"],
        "peak_rss_gb": result["peak_rss_bytes"] / 1e9,
        "rss_after_imports_gb": result["imported"] / 1e9,
        "raw_gb": compressed / 1e9,
        "store_gb": store / 1e9,
        "bench_peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9,
    }
    headers = ["nodes", "edges (file)", "edges (stored)", "seconds", "peak RSS GB"]
    row = [nodes, edges, result["num_edges"], result["seconds"], summary["peak_rss_gb"]]
    row += [summary["rss_after_imports_gb"], summary["raw_gb"], summary["store_gb"]]
    print_report([*headers, "RSS after imports GB", "raw GB", "store GB"], [row], summary)
    return summary


def write_products_like(folder: Path, nodes: int, edges: int, features: int, seed: int) -> None:
    """OGB's products files under ``folder``: ``raw/{num-node-list,num-edge-list,edge,
    node-feat,node-label}.csv.gz`` and ``split/sales_ranking/{train,valid,test}.csv.gz``
    (8% / 2% / 90% of the nodes), in blocks (bounded memory)."""
    rng = np.random.default_rng(seed)
    raw = folder / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    _write_lines(raw / "num-node-list.csv.gz", [str(nodes)])
    _write_lines(raw / "num-edge-list.csv.gz", [str(edges)])
    with gzip.open(raw / "edge.csv.gz", "wb", compresslevel=1) as out:
        for start in range(0, edges, _ROWS_PER_BLOCK * 16):
            count = min(_ROWS_PER_BLOCK * 16, edges - start)
            pairs = rng.integers(0, nodes, size=(count, 2))
            out.write(_fixed_width(pairs, len(str(nodes)), decimals=False))
    with gzip.open(raw / "node-feat.csv.gz", "wb", compresslevel=1) as out:
        for start in range(0, nodes, _ROWS_PER_BLOCK):
            count = min(_ROWS_PER_BLOCK, nodes - start)
            values = rng.uniform(-1, 1, size=(count, features))
            out.write(_fixed_width(values, 6, decimals=True))
    labels = rng.integers(0, PRODUCTS["classes"], size=nodes)
    _write_lines(raw / "node-label.csv.gz", labels.astype(str))
    order = rng.permutation(nodes)
    bounds = [int(nodes * 0.08), int(nodes * 0.1)]
    split = folder / "split" / "sales_ranking"
    split.mkdir(parents=True, exist_ok=True)
    for name, ids in zip(("train", "valid", "test"), np.split(order, bounds), strict=True):
        _write_lines(split / f"{name}.csv.gz", np.sort(ids).astype(str))


def _fixed_width(values: np.ndarray, digits: int, decimals: bool) -> bytes:
    """``[rows, columns]`` values as CSV text, vectorized: with ``decimals``, floats in
    ``(-1, 1)`` as ``+0.dddddd`` / ``-0.dddddd`` (``digits`` after the point), else
    non-negative ints zero-padded to ``digits``."""
    rows, columns = values.shape
    if decimals:
        scaled = np.minimum(np.rint(np.abs(values) * 10**digits), 10**digits - 1).astype(np.int64)
        head = np.empty((rows, columns, 3), dtype=np.uint8)
        head[..., 0] = np.where(values < 0, ord("-"), ord("+"))
        head[..., 1], head[..., 2] = ord("0"), ord(".")
    else:
        scaled = values.astype(np.int64)
        head = np.empty((rows, columns, 0), dtype=np.uint8)
    powers = 10 ** np.arange(digits - 1, -1, -1, dtype=np.int64)
    body = (scaled[..., None] // powers % 10 + ord("0")).astype(np.uint8)
    comma = np.full((rows, columns, 1), ord(","), dtype=np.uint8)
    comma[:, -1, 0] = ord("\n")
    return np.concatenate([head, body, comma], axis=2).tobytes()


def _write_lines(path: Path, lines) -> None:
    with gzip.open(path, "wb") as out:
        out.write(("\n".join(lines) + "\n").encode())
