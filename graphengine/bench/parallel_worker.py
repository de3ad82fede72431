"""One worker of ``graphengine bench train --parallel hybrid``, started by torchrun.

``python -m graphengine.bench.parallel_worker CONFIG_JSON OUT``: opens the dataset (local
rank 0 first, generating it if needed), keeps ``steps * batch_size`` of its training nodes,
trains one untimed epoch over them (Numba compiles, pages fault in), then one timed epoch with
the Trainer in the configured ``parallel`` mode, and writes that epoch's metrics, the
feature memory it holds and its peak resident memory to ``OUT.<rank>`` as JSON.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from graphengine.data.partition.store import peak_rss_bytes
from graphengine.datasets import load_dataset
from graphengine.distributed.launch import finish
from graphengine.nn.models import build_model
from graphengine.train.trainer import Trainer


def mapped_bytes(suffix: str) -> int:
    """Resident bytes of this process's memory maps of files ending in ``suffix``."""
    total, current = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        if not line[:1].isupper():  # a mapping's header line: address range, perms, path
            current = line.endswith(suffix)
        elif current and line.startswith("Rss:"):
            total += int(line.split()[1]) * 1024
    return total


def main(config: dict, out: Path) -> None:
    def load():
        return load_dataset(config["dataset"], config["root"], num_features=config["width"])

    first = int(os.environ.get("LOCAL_RANK", 0)) == 0
    dataset = load() if first else None
    dist.barrier()
    dataset = dataset if first else load()
    batch_size, steps = config["batch_size"], config["steps"]
    rng = np.random.default_rng(0)
    kept = rng.choice(dataset.train_idx, min(steps * batch_size, len(dataset.train_idx)), False)
    subset = dataclasses.replace(dataset, train_idx=np.sort(kept))
    torch.manual_seed(0)
    model = build_model(
        config["model"],
        dataset.num_features,
        config["hidden"],
        dataset.num_classes,
        len(config["fanouts"]),
    )
    trainer = Trainer(
        model,
        subset,
        config["fanouts"],
        batch_size=batch_size,
        eval_mode="sampled",
        progress=False,
        parallel=config["parallel"],
    )
    trainer.train_epoch()  # warm-up, untimed
    dist.barrier()
    metrics = trainer.train_epoch()
    # Hybrid's batches hold their columns of the table; data parallel's have none: each
    # worker maps the whole table.
    columns = getattr(trainer.batches, "feature_columns", None)
    report = {
        "rank": dist.get_rank(),
        "steps": len(trainer.train_loader),
        "full_epoch_steps": -(-len(dataset.train_idx) // batch_size),
        "epoch_s": metrics["epoch_s"],
        "stage_s": metrics["stage_s"],
        "traffic": metrics["traffic"],
        "feature_held_bytes": columns.nbytes if columns is not None else int(dataset.x.nbytes),
        "feature_mapped_resident_bytes": mapped_bytes("/x.npy"),
        "peak_rss_bytes": peak_rss_bytes(),
    }
    Path(f"{out}.{dist.get_rank()}").write_text(json.dumps(report))


if __name__ == "__main__":
    dist.init_process_group("gloo")
    main(json.loads(sys.argv[1]), Path(sys.argv[2]))
    finish(0)
