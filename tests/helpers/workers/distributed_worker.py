"""Worker programs that tests/test_distributed.py starts under torchrun (2 processes, gloo).

``grad OUT ROOT``: trains one epoch with the data-parallel Trainer and rank 0 saves the
parameters to OUT. ``evaluate OUT ROOT``: every rank takes part in a sampled evaluation of an
untrained model (seeded) and writes its accuracy to ``OUT.<rank>``. ``memory OUT ROOT``:
opens the dataset memory-mapped, reads every feature row and writes this worker's resident
and proportional share of the feature file.
"""

import json
import sys
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from graphengine.datasets import load_dataset
from graphengine.distributed.launch import finish
from graphengine.nn.models import build_model
from graphengine.train.trainer import Trainer

GRAD_SETUP = {"hidden": 16, "fanouts": [-1, -1], "batch_size": 32, "lr": 0.01, "seed": 3}
EVAL_SETUP = {"fanouts": [-1, -1], "batch_size": 256, "seed": 5}


def grad(out: Path, root: Path) -> None:
    dataset = load_dataset("synthetic-small", root=root)
    torch.manual_seed(GRAD_SETUP["seed"])
    model = build_model(
        "sage", dataset.num_features, GRAD_SETUP["hidden"], dataset.num_classes, 2, dropout=0.0
    )
    trainer = Trainer(
        model,
        dataset,
        GRAD_SETUP["fanouts"],
        GRAD_SETUP["batch_size"],
        lr=GRAD_SETUP["lr"],
        seed=GRAD_SETUP["seed"],
        progress=False,
        num_workers=1,
    )
    trainer.train_epoch()
    if dist.get_rank() == 0:
        torch.save(model.state_dict(), out)


def eval_trainer(dataset) -> Trainer:
    """An untrained, seeded GraphSAGE whose sampled evaluation takes every neighbor."""
    torch.manual_seed(EVAL_SETUP["seed"])
    model = build_model("sage", dataset.num_features, 16, dataset.num_classes, 2, dropout=0.0)
    return Trainer(
        model,
        dataset,
        EVAL_SETUP["fanouts"],
        EVAL_SETUP["batch_size"],
        seed=EVAL_SETUP["seed"],
        eval_mode="sampled",
        progress=False,
    )


def evaluate(out: Path, root: Path) -> None:
    trainer = eval_trainer(load_dataset("synthetic-small", root=root))
    accuracy = trainer.evaluate("test")
    Path(f"{out}.{dist.get_rank()}").write_text(json.dumps({"accuracy": accuracy}))


def memory(out: Path, root: Path) -> None:
    dataset = load_dataset("synthetic-small", root=root)
    checksum = float(np.asarray(dataset.x, dtype=np.float64).sum())
    dist.barrier()  # both workers have the whole file mapped and touched now
    rss = pss = 0
    current = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        if not line[:1].isupper():  # a mapping's header line: address range, perms, path
            current = line.endswith("/x.npy")
        elif current and line.startswith("Rss:"):
            rss += int(line.split()[1]) * 1024
        elif current and line.startswith("Pss:"):
            pss += int(line.split()[1]) * 1024
    dist.barrier()
    result = {"rank": dist.get_rank(), "rss": rss, "pss": pss, "checksum": checksum}
    Path(f"{out}.{dist.get_rank()}").write_text(json.dumps(result))


if __name__ == "__main__":
    dist.init_process_group("gloo")
    programs = {"grad": grad, "evaluate": evaluate, "memory": memory}
    programs[sys.argv[1]](Path(sys.argv[2]), Path(sys.argv[3]))
    finish(0)
