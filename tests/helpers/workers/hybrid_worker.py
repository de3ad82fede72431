"""Worker programs that tests/test_hybrid.py starts under torchrun (2 or 3 processes, gloo).

``exact OUT ROOT MODEL FANOUTS``: one epoch of ``--parallel data`` and one of ``--parallel hybrid``
from the same initial weights, seeds and batches; rank 0 writes both models' parameters,
both epochs' losses and both sampled validation accuracies to OUT (a torch file).
``memory OUT ROOT``: trains a hybrid epoch, then writes to ``OUT.<rank>`` this worker's
column range, the resident bytes of the memory-mapped feature file in it, and the bytes its
feature slice takes (measured by tracemalloc while it is read again).
``partitioned OUT PARTS MODEL FANOUTS``: as ``exact`` on this worker's part of the partition
PARTS (``--parallel data`` with remote feature rows, then hybrid on the parts), rank 0 also
writing both epochs' ``partition`` metrics.
``columns OUT HOSTS``: opens its part from ``HOSTS/host-<rank>`` (a copy of the partition
holding that part only), redistributes the parts' rows to feature columns, checks that an
epoch of :class:`DistHybridNeighborLoader` batches is :class:`DistNeighborLoader`'s (the same
nodes, edges and seed labels, its own batch's inputs the columns of the fetched rows) and
writes this worker's column range, table and the batches it checked to ``OUT.<rank>`` (a
torch file).
"""

import json
import sys
import tracemalloc
from pathlib import Path

import torch
import torch.distributed as dist

from graphengine.bench.parallel_worker import mapped_bytes
from graphengine.datasets import load_dataset
from graphengine.distributed.columns import redistribute_columns
from graphengine.distributed.data import DistData
from graphengine.distributed.exchange import new_exchange
from graphengine.distributed.launch import finish
from graphengine.loader.dist_hybrid_loader import DistHybridNeighborLoader
from graphengine.loader.dist_neighbor_loader import DistNeighborLoader
from graphengine.nn.models import build_model
from graphengine.train.trainer import Trainer

SETUP = {"hidden": 16, "lr": 0.01, "seed": 7}


def trainer_for(dataset, name: str, parallel: str, fanouts=(5, 5)) -> Trainer:
    torch.manual_seed(SETUP["seed"])
    model = build_model(
        name, dataset.num_features, SETUP["hidden"], dataset.num_classes, 2, dropout=0.0
    )
    world_size = dist.get_world_size()
    return Trainer(
        model,
        dataset,
        list(fanouts),
        batch_size=176 * world_size,
        lr=SETUP["lr"],
        seed=SETUP["seed"],
        eval_mode="sampled",
        progress=False,
        parallel=parallel,
    )


def exact(out: Path, root: Path, name: str, fanouts: str) -> None:
    _data_against_hybrid(out, load_dataset("synthetic-small", root=root), name, fanouts)


def partitioned(out: Path, parts: Path, name: str, fanouts: str) -> None:
    _data_against_hybrid(out, DistData.open(parts), name, fanouts, partitioned=True)


def _data_against_hybrid(out: Path, dataset, name: str, fanouts: str, partitioned=False) -> None:
    """Train ``dataset`` one epoch data-parallel, then hybrid; rank 0 saves each run's model
    state, loss, validation accuracy and traffic (and a partition's counters and kind)."""
    result = {}
    for parallel in ("data", "hybrid"):
        trainer = trainer_for(dataset, name, parallel, [int(f) for f in fanouts.split(",")])
        (metrics,) = trainer.fit(1, eval_every=1)
        result[parallel] = {
            "state": {k: v.detach().clone() for k, v in trainer.model.state_dict().items()},
            "loss": metrics["loss"],
            "val_acc": metrics["val_acc"],
            "traffic": metrics["traffic"],
        }
        if partitioned:
            result[parallel]["partition"] = metrics["partition"]
            result[parallel]["kind"] = type(trainer.batches).__name__
    if dist.get_rank() == 0:
        torch.save(result, out)


def columns(out: Path, hosts: Path) -> None:
    data = DistData.open(hosts / f"host-{dist.get_rank()}")
    structure = new_exchange()
    mine = redistribute_columns(data.part, structure)
    options = {"batch_size": 64, "shuffle": True, "seed": 3}
    rows = list(DistNeighborLoader(data, [3, 2], **options))
    hybrid = list(DistHybridNeighborLoader(data, [3, 2], mine, structure, **options))
    assert len(hybrid) == len(rows) > 0
    for got, expected in zip(hybrid, rows, strict=True):
        for key in ("n_id", "e_id", "edge_index", "input_id"):
            assert torch.equal(got.batch[key], expected[key]), key
        assert torch.equal(got.y, expected.y[: expected.batch_size])
        assert torch.equal(got.inputs[data.part.part], expected.x[:, mine.start : mine.stop])
    report = {"start": mine.start, "stop": mine.stop, "table": mine.table, "batches": len(rows)}
    torch.save(report, f"{out}.{data.part.part}")


def memory(out: Path, root: Path) -> None:
    dataset = load_dataset("synthetic-small", root=root)
    trainer = trainer_for(dataset, "sage", "hybrid")
    trainer.train_epoch()
    mapped = mapped_bytes("/x.npy")  # resident pages of the memory-mapped feature file
    tracemalloc.start()
    columns = trainer.strategy.feature_columns(dataset.x)
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    report = {
        "start": columns.start,
        "stop": columns.stop,
        "held": held,
        "mapped": mapped,
        "table_bytes": int(dataset.x.nbytes),
        "slice_bytes": trainer.batches.feature_columns.nbytes,
        "same": bool(torch.equal(columns.table, trainer.batches.feature_columns.table)),
    }
    Path(f"{out}.{dist.get_rank()}").write_text(json.dumps(report))


if __name__ == "__main__":
    dist.init_process_group("gloo")
    programs = {"exact": exact, "memory": memory, "partitioned": partitioned, "columns": columns}
    programs[sys.argv[1]](Path(sys.argv[2]), Path(sys.argv[3]), *sys.argv[4:])
    finish(0)
