"""Worker programs that tests/test_hybrid.py starts under torchrun (2 or 3 processes, gloo).

``exact OUT ROOT MODEL``: one epoch of ``--parallel data`` and one of ``--parallel hybrid``
from the same initial weights, seeds and batches; rank 0 writes both models' parameters,
both epochs' losses and both sampled validation accuracies to OUT (a torch file).
``memory OUT ROOT``: builds a hybrid Trainer and writes this worker's column range and the
bytes its feature slice took (measured by tracemalloc) to ``OUT.<rank>``.
"""

import json
import sys
import tracemalloc
from pathlib import Path

import torch
import torch.distributed as dist

from graphengine.datasets import load_dataset
from graphengine.distributed.launch import finish
from graphengine.nn.models import build_model
from graphengine.train.trainer import Trainer

SETUP = {"hidden": 16, "fanouts": [-1, -1], "lr": 0.01, "seed": 7}


def trainer_for(dataset, name: str, parallel: str) -> Trainer:
    torch.manual_seed(SETUP["seed"])
    model = build_model(
        name, dataset.num_features, SETUP["hidden"], dataset.num_classes, 2, dropout=0.0
    )
    world_size = dist.get_world_size()
    return Trainer(
        model,
        dataset,
        SETUP["fanouts"],
        batch_size=176 * world_size,
        lr=SETUP["lr"],
        seed=SETUP["seed"],
        eval_mode="sampled",
        progress=False,
        parallel=parallel,
    )


def exact(out: Path, root: Path, name: str) -> None:
    dataset = load_dataset("synthetic-small", root=root)
    result = {}
    for parallel in ("data", "hybrid"):
        trainer = trainer_for(dataset, name, parallel)
        (metrics,) = trainer.fit(1, eval_every=1)
        result[parallel] = {
            "state": {k: v.detach().clone() for k, v in trainer.model.state_dict().items()},
            "loss": metrics["loss"],
            "val_acc": metrics["val_acc"],
            "traffic": metrics["traffic"],
        }
    if dist.get_rank() == 0:
        torch.save(result, out)


def memory(out: Path, root: Path) -> None:
    dataset = load_dataset("synthetic-small", root=root)
    tracemalloc.start()
    trainer = trainer_for(dataset, "sage", "hybrid")
    held, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    columns = trainer.feature_columns
    report = {
        "start": columns.start,
        "stop": columns.stop,
        "held": held,
        "peak": peak,
        "table_bytes": int(dataset.x.nbytes),
        "slice_bytes": columns.nbytes,
        "checksum": float(columns.table.double().sum()),
    }
    Path(f"{out}.{dist.get_rank()}").write_text(json.dumps(report))


if __name__ == "__main__":
    dist.init_process_group("gloo")
    programs = {"exact": exact, "memory": memory}
    programs[sys.argv[1]](Path(sys.argv[2]), Path(sys.argv[3]), *sys.argv[4:])
    finish(0)
