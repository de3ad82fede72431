"""``graphengine bench train``: end-to-end training throughput, against a PyG user's loop.

GraphSAGE (3 layers, hidden 256 by default) on fanouts 15,10,5 and batches of 1024:
a fixed number of training steps through graphengine's pipelined loader and the Trainer
(layers run on blocks, :mod:`graphengine.nn.blocks`), and with ``--vs pyg`` the same model
through PyG's ``NeighborLoader`` (at its best ``num_workers`` of 0, 1, 2) called as
``model(batch.x, batch.edge_index)``.
Epoch time is extrapolated from the steps to the full training split. With
``--epochs E`` both also train E full epochs and report test accuracy, both evaluated
by the Trainer (exact full-neighbor inference). PyG runs
first, with glibc's default allocator settings (what its users get); graphengine
then runs with :func:`graphengine.runtime.tune_host_allocator`, as its CLI does.
"""

from __future__ import annotations

import json
import logging
import math
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch_geometric.nn import GraphSAGE

from graphengine.bench.report import print_report
from graphengine.bench.sample import set_threads
from graphengine.datasets import load_dataset
from graphengine.loader import NeighborLoader
from graphengine.runtime import tune_host_allocator
from graphengine.train.trainer import Trainer

log = logging.getLogger(__name__)


def run(
    dataset_name: str,
    fanouts: list[int],
    batch_size: int,
    hidden: int,
    batches: int,
    threads: int,
    root: str | None = None,
    vs_pyg: bool = False,
    epochs: int = 0,
    seed: int = 0,
    forward: str = "auto",
    device: str = "cpu",
) -> dict:
    set_threads(threads)
    device = torch.device(device)
    dataset = load_dataset(dataset_name, root=root)
    batches_per_epoch = math.ceil(len(dataset.train_idx) / batch_size)
    if batches >= batches_per_epoch:
        raise ValueError(
            f"'batches' must be below the {batches_per_epoch} batches of an epoch (one warms up)"
        )
    summary = {
        "bench": "train",
        "dataset": dataset_name,
        "model": f"sage-{len(fanouts)}x{hidden}",
        "fanouts": fanouts,
        "batch_size": batch_size,
        "batches": batches,
        "threads": threads,
        "device": str(device),
    }
    rows = []
    pyg = None
    if vs_pyg:
        # PyG first: its worker processes fork, which Numba's OpenMP pool would not survive;
        # and with glibc's default allocator settings, which is what PyG's users run with.
        pyg = _pyg_steps(dataset, fanouts, batch_size, hidden, batches, seed, device)
    summary["allocator_tuned"] = tune_host_allocator()
    ours = _graphengine_steps(dataset, fanouts, batch_size, hidden, batches, seed, forward, device)
    epoch_s = ours["step_s"] * batches_per_epoch
    stages = ours["stages"]
    slowest = max(stages, key=lambda k: stages[k] if k != "waiting" else -1)
    summary.update(
        epoch_s=epoch_s,
        step_s=ours["step_s"],
        stage_s=stages,
        slowest_stage=slowest,
        wall_over_slowest=ours["wall"] / stages[slowest],
        overlap=sum(v for k, v in stages.items() if k != "waiting") / ours["wall"],
        waiting_share=stages["waiting"] / ours["wall"],
    )
    summary["forward"] = ours["forward"]
    rows.append([f"graphengine (pipelined, {ours['forward']})", ours["step_s"], epoch_s, ""])
    if pyg is not None:
        if "error" in pyg:
            summary["pyg"] = pyg["error"]
        else:
            pyg_epoch = pyg["step_s"] * batches_per_epoch
            rows.append(
                [
                    f"PyG NeighborLoader (num_workers={pyg['num_workers']})",
                    pyg["step_s"],
                    pyg_epoch,
                    "",
                ]
            )
            summary.update(
                pyg_epoch_s=pyg_epoch,
                pyg_num_workers=pyg["num_workers"],
                speedup_vs_pyg=pyg_epoch / epoch_s,
            )
            rows[0][3] = f"{pyg_epoch / epoch_s:.2f}x"
    if epochs:
        summary["test_acc"] = _accuracy_graphengine(
            dataset, fanouts, batch_size, hidden, epochs, seed, device
        )
        if vs_pyg and pyg is not None and "error" not in pyg:
            summary["pyg_test_acc"] = _accuracy_pyg(
                dataset, fanouts, batch_size, hidden, epochs, seed, device
            )
    stage_rows = [
        [f"  stage: {k}", v / batches, v / batches * batches_per_epoch, ""]
        for k, v in stages.items()
    ]
    print_report(["run", "s/step", "epoch s (extrapolated)", "speedup"], rows + stage_rows, summary)
    if "pyg" in summary:
        log.warning("%s", summary["pyg"])
    return summary


def _model(dataset, hidden, num_layers, seed) -> GraphSAGE:
    torch.manual_seed(seed)
    return GraphSAGE(dataset.num_features, hidden, num_layers, dataset.num_classes)


def _graphengine_steps(
    dataset, fanouts, batch_size, hidden, batches, seed, forward, device
) -> dict:
    """Times ``batches`` steps from the start of an iteration over exactly that many batches
    (after one warm-up step that compiles the kernels), so that every stage's time
    counts the same batches as the wall time."""
    model = _model(dataset, hidden, len(fanouts), seed)
    trainer = Trainer(
        model,
        dataset,
        fanouts,
        batch_size,
        seed=seed,
        progress=False,
        eval_mode="sampled",
        forward=forward,
        device=device,
    )
    seeds = np.random.default_rng(seed).permutation(np.asarray(dataset.train_idx))
    on_device = {"device": device, "pin_memory": device.type == "cuda"}
    warm_up = NeighborLoader(
        dataset, fanouts, batch_size=batch_size, input_nodes=seeds[:batch_size], **on_device
    )
    trainer.model.train()
    trainer.step(next(iter(warm_up)))
    loader = NeighborLoader(
        dataset,
        fanouts,
        batch_size=batch_size,
        input_nodes=seeds[batch_size : (batches + 1) * batch_size],
        seed=seed,
        num_workers=1,
        **on_device,
    )
    compute = 0.0
    start = time.perf_counter()
    for batch in loader:
        step_start = time.perf_counter()
        trainer.step(batch)
        compute += time.perf_counter() - step_start
    wall = time.perf_counter() - start
    stages = loader.stage_times
    stages["compute"] = compute
    return {
        "step_s": wall / batches,
        "wall": wall,
        "stages": stages,
        "forward": trainer.forward_mode,
    }


def _pyg_loader(data, fanouts, batch_size, num_workers, input_nodes):
    from torch_geometric.loader import NeighborLoader as PyGNeighborLoader

    return PyGNeighborLoader(
        data,
        num_neighbors=fanouts,
        batch_size=batch_size,
        input_nodes=input_nodes,
        shuffle=True,
        num_workers=num_workers,
        persistent_workers=num_workers > 0,
    )


def _pyg_steps(dataset, fanouts, batch_size, hidden, batches, seed, device) -> dict:
    import torch_geometric.typing as pyg_typing

    if not (pyg_typing.WITH_PYG_LIB or pyg_typing.WITH_TORCH_SPARSE):
        return {"error": "PyG sampling backend not installed (pyg-lib or torch-sparse)"}
    data = dataset.to_data()
    train = torch.from_numpy(np.array(dataset.train_idx))
    best = None
    probes = max(1, min(3, math.ceil(len(train) / batch_size) - 1))
    for num_workers in (0, 1, 2):
        loader = iter(_pyg_loader(data, fanouts, batch_size, num_workers, train))
        next(loader)
        start = time.perf_counter()
        for _ in range(probes):
            next(loader)
        seconds = time.perf_counter() - start
        del loader
        log.info("PyG loading with num_workers=%d: %.3f s per batch", num_workers, seconds / probes)
        if best is None or seconds < best[1]:
            best = (num_workers, seconds)
    model = _model(dataset, hidden, len(fanouts), seed).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.003)
    iterator = iter(_pyg_loader(data, fanouts, batch_size, best[0], train))
    next(iterator)
    start = time.perf_counter()
    for _, batch in zip(range(batches), iterator, strict=False):
        _pyg_step(model, optimizer, batch.to(device))
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    wall = time.perf_counter() - start
    return {"step_s": wall / batches, "num_workers": best[0]}


def _pyg_step(model, optimizer, batch) -> None:
    """A PyG user's training step."""
    optimizer.zero_grad()
    out = model(batch.x, batch.edge_index)[: batch.batch_size]
    F.cross_entropy(out, batch.y[: batch.batch_size]).backward()
    optimizer.step()


def _accuracy_graphengine(dataset, fanouts, batch_size, hidden, epochs, seed, device) -> float:
    model = _model(dataset, hidden, len(fanouts), seed)
    trainer = Trainer(model, dataset, fanouts, batch_size, seed=seed, progress=False, device=device)
    trainer.fit(epochs, eval_every=epochs)
    return trainer.evaluate("test")


def _accuracy_pyg(dataset, fanouts, batch_size, hidden, epochs, seed, device) -> float:
    """Trains through PyG's loader; tests with the Trainer's evaluation (exact full-neighbor
    inference, layer-wise on large graphs), the same as for graphengine's model."""
    data = dataset.to_data()
    model = _model(dataset, hidden, len(fanouts), seed).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.003)
    loader = _pyg_loader(data, fanouts, batch_size, 0, data.train_mask)
    for _ in range(epochs):
        model.train()
        for batch in loader:
            _pyg_step(model, optimizer, batch.to(device))
    evaluator = Trainer(
        model, dataset, fanouts, batch_size, seed=seed, progress=False, device=device
    )
    return evaluator.evaluate("test")


def run_workers(
    dataset_name: str,
    fanouts: list[int],
    batch_size: int,
    hidden: int,
    nproc: int,
    root: str | None = None,
) -> dict:
    """Seeds per second of ``graphengine train`` with 1..``nproc`` data-parallel workers.

    Each run trains two epochs without evaluation; the second epoch is timed. Every worker
    takes ``batch_size`` seeds a step (``--worker-batch-size``: weak scaling, as before the
    global batch became the default). Scaling efficiency is the total throughput with N
    workers over N times one worker's.
    """
    rows, totals = [], {}
    for workers in range(1, nproc + 1):
        command = [
            sys.executable,
            "-m",
            "graphengine",
            "train",
            "--dataset",
            dataset_name,
            "--fanouts",
            ",".join(map(str, fanouts)),
            "--worker-batch-size",
            str(batch_size),
            "--hidden",
            str(hidden),
            "--epochs",
            "2",
            "--eval-every",
            "0",
            "--no-progress",
            "--nproc",
            str(workers),
        ]
        if root is not None:
            command += ["--root", root]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
        epochs = [json.loads(line) for line in done.stdout.splitlines() if '"epoch"' in line]
        last = epochs[-1]
        totals[workers] = last["seeds_per_s"]
        rows.append(
            [
                workers,
                last["seeds_per_s"],
                last["seeds_per_s_per_worker"],
                last["epoch_s"],
                totals[workers] / (workers * totals[1]),
            ]
        )
    summary = {
        "bench": "train-workers",
        "dataset": dataset_name,
        "model": f"sage-{len(fanouts)}x{hidden}",
        "fanouts": fanouts,
        "batch_size": batch_size,
        "seeds_per_s": totals,
        "scaling_efficiency": {n: totals[n] / (n * totals[1]) for n in totals},
    }
    print_report(
        ["workers", "seeds/s total", "seeds/s per worker", "epoch s", "efficiency"], rows, summary
    )
    return summary
