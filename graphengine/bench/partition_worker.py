"""One worker of ``graphengine bench partition``, started by torchrun (one per part).

``python -m graphengine.bench.partition_worker PARTITION CONFIG_JSON OUT``: for each cache size
of the config, loads ``batches`` batches of this worker's training nodes with the
:class:`DistNeighborLoader` (after one untimed batch) and writes, per cache size, the seconds
per batch and what crossed parts per batch to ``OUT.<rank>`` as JSON; with the peak resident
memory of the worker. The cache is chosen once from one pre-sampled epoch (as the loader's
``remote_cache`` does) and cut to each size.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import torch.distributed as dist

from graphengine.data.partition.store import peak_rss_bytes
from graphengine.distributed.data import DistData
from graphengine.distributed.features import cache_rows
from graphengine.distributed.launch import finish
from graphengine.loader.dist_neighbor_loader import DistNeighborLoader


def main(partition: Path, config: dict, out: Path) -> None:
    data = DistData.open(partition, verify=False)
    loader = DistNeighborLoader(
        data, config["fanouts"], batch_size=config["worker_batch_size"], shuffle=True, seed=0
    )
    started = time.perf_counter()
    ranked = loader.access_counts(epochs=1).ranked()
    rehearsal_s = time.perf_counter() - started
    features = data.features
    row_bytes = features.num_features * features.store["x"].element_size() + 8
    results = {}
    for size in config["cache_sizes"]:
        capacity = cache_rows(size, row_bytes, features.num_remote_nodes)
        features.fill_cache(np.sort(ranked[:capacity]))
        loader.set_epoch(1)
        batches = iter(loader)
        next(batches)  # warm-up, untimed
        loader.reset_stats()
        dist.barrier()
        started = time.perf_counter()
        for _ in range(config["batches"]):
            next(batches)
        seconds = time.perf_counter() - started
        stats = loader.reset_stats()
        batches.close()
        results[str(size)] = {
            "cache_rows": features.cache.num_rows,
            "s_per_batch": seconds / config["batches"],
            "per_batch": {k: v / config["batches"] for k, v in stats.items()},
        }
        dist.barrier()
    report = {
        "rank": dist.get_rank(),
        "batches_per_epoch": len(loader),
        "rehearsal_s": rehearsal_s,
        "peak_rss_bytes": peak_rss_bytes(),
        "results": results,
    }
    Path(f"{out}.{dist.get_rank()}").write_text(json.dumps(report))


if __name__ == "__main__":
    dist.init_process_group("gloo")
    main(Path(sys.argv[1]), json.loads(sys.argv[2]), Path(sys.argv[3]))
    finish(0)
