"""``graphengine bench train``: end-to-end training throughput, against PyG's and DGL's loops.

PyG's GraphSAGE (or GAT with 4 heads, or GCN: ``--model``; 3 layers, hidden 256 by default)
on fanouts 15,10,5 and batches of 1024: a fixed number of training steps (after one warm-up
step) through graphengine's pipelined loader and the Trainer (layers run on blocks where the
model allows, :mod:`graphengine.nn.blocks`); with ``--vs pyg`` the same model through PyG's
``NeighborLoader`` (at its best ``num_workers`` of 0, 1, 2) called as ``model(batch.x,
batch.edge_index)``; with ``--vs dgl`` DGL's own loop and layers
(:mod:`graphengine.bench.train_dgl`). Every library runs in its own fresh Python process:
glibc raises its mmap threshold as large blocks are freed, so a loop that runs after another
in one process pays fewer page faults. Each of ``rounds`` rounds runs graphengine three ways
(as its CLI runs it, with :func:`graphengine.runtime.tune_host_allocator`; as a library user's
process, with glibc's defaults and graphengine's own host cache; the same with the host cache
off), then each peer, one process each; the report gives each its median seconds a step over
the rounds, their range, the ratios of medians and the peak resident memory after the timed
steps. The peers run with glibc's defaults, as their users run them, or tuned as graphengine's
CLI is under ``--tune-peers`` (both tuned). Epoch time is extrapolated from the median step
to the full training split. With ``--epochs E`` each library also trains E full epochs (in
the first round, after its timed steps) and reports test accuracy by exact full-neighbor
inference: the Trainer's for the PyG model graphengine and PyG train, DGL's layer-wise one for
DGL's model.

``python -m graphengine.bench.train CONFIG_JSON`` is one library's process: it prints one
JSON line with its ``step_s`` (or an ``error`` saying why the library cannot run here).
"""

from __future__ import annotations

import json
import logging
import math
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch_geometric.nn import GAT, GCN, GraphSAGE

from graphengine.bench import train_dgl
from graphengine.bench.peers import Unavailable, check_peers, pyg_sampling
from graphengine.bench.report import print_report
from graphengine.bench.sample import set_threads
from graphengine.bench.step_profile import CATEGORIES, profile_steps
from graphengine.data.disk_io import IoCounters
from graphengine.datasets import load_dataset
from graphengine.datasets.dataset import DEFAULT_CACHE_POLICY, choose_feature_reads
from graphengine.loader import NeighborLoader
from graphengine.runtime import host_memory_cache, set_host_memory_cache, tune_host_allocator
from graphengine.train.trainer import Trainer

log = logging.getLogger(__name__)

# The processes of a round, in order: key -> row label (graphengine's gets its forward mode).
LIBRARIES = {
    "graphengine": "graphengine (pipelined, {forward})",
    "graphengine_user": "graphengine (library user: its host cache, glibc defaults)",
    "graphengine_uncached": "graphengine (library user, host cache off)",
    "pyg": "PyG NeighborLoader (num_workers={num_workers})",
    "dgl": "DGL 2.1 DataLoader + {dgl_layer} on blocks",
}


# DGL's layer for each model of --model.
DGL_LAYERS = {"sage": "SAGEConv", "gat": "GATConv", "gcn": "GraphConv"}


def check_timed_steps(dataset, batch_size: int, batches: int, profile: int = 0) -> int:
    """Refuse more timed (and profiled) steps than one epoch of ``dataset``'s training nodes
    has batches of ``batch_size``, each run starting with a warm-up step; returns the batches
    an epoch has.

    Raises:
        ValueError: naming the most that fit.
    """
    batches_per_epoch = math.ceil(len(dataset.train_idx) / batch_size)
    warm_ups = 2 if profile else 1
    if batches + profile + warm_ups > batches_per_epoch:
        asked = "'batches' and 'profile' together" if profile else "'batches'"
        raise ValueError(
            f"{asked} must be at most {batches_per_epoch - warm_ups}: an epoch has "
            f"{batches_per_epoch} batches, and the timed steps start with a warm-up step"
        )
    return batches_per_epoch


def run(
    dataset_name: str,
    fanouts: list[int],
    batch_size: int,
    hidden: int,
    batches: int,
    threads: int,
    root: str | None = None,
    vs: list[str] | tuple[str, ...] = (),
    epochs: int = 0,
    seed: int = 0,
    forward: str = "auto",
    device: str = "cpu",
    sample_on: str | None = None,
    rounds: int = 1,
    tune_peers: bool = False,
    precision: str = "fp32",
    profile: int = 0,
    model: str = "sage",
    access: str | None = None,
    feature_cache: int | str | None = None,
    feature_reads: str = "auto",
    cache_policy: str = DEFAULT_CACHE_POLICY,
    variants: str = "all",
    plot: str | Path | None = None,
) -> dict:
    """Time each library's loop ``rounds`` times, each time in a fresh process, alternating
    (graphengine, graphengine as a library user, then the peers in ``vs``: ``"pyg"``,
    ``"dgl"``); print a table of median seconds a step and their ratios, graphengine's stage
    times (the mean over rounds), and a JSON line. ``tune_peers`` runs the peers with
    :func:`~graphengine.runtime.tune_host_allocator` too (both tuned), instead of glibc's
    defaults (as their users run them). ``precision`` is graphengine's (the Trainer's); the
    peers train in float32. With ``profile`` steps, graphengine's first process also profiles
    that many steps' compute (:mod:`graphengine.bench.step_profile`): seconds by category and
    the median step over its dense matrix products (``step_over_dense``).

    For a store read from disk: ``access`` advises the kernel how graphengine's processes read
    the memory maps (:meth:`~graphengine.datasets.GraphDataset.advise`), ``feature_cache``
    keeps hot feature rows in memory (the Trainer's), and each graphengine row reports the
    bytes read from disk and the major page faults a step (``io_per_step``) and the cache's
    hit rate. ``variants="cli"`` runs graphengine as its CLI runs it only (no library-user
    rows). With ``plot``, also draw each library's seconds a step, graphengine's split into
    its stages, to that file (:func:`graphengine.plot.plot_step`)."""
    check_peers(vs)
    if model not in DGL_LAYERS:
        raise ValueError(f"'model' must be one of {sorted(DGL_LAYERS)} (got {model!r})")
    if rounds < 1:
        raise ValueError(f"'rounds' must be at least 1 (got {rounds})")
    dataset = load_dataset(dataset_name, root=root)  # generated here once, not per process
    batches_per_epoch = check_timed_steps(dataset, batch_size, batches, profile)
    config = {
        "dataset": dataset_name,
        "root": root,
        "fanouts": fanouts,
        "batch_size": batch_size,
        "hidden": hidden,
        "batches": batches,
        "threads": threads,
        "seed": seed,
        "forward": forward,
        "device": device,
        "sample_on": sample_on,
        "tune_peers": bool(tune_peers),
        "precision": precision,
        "model": model,
    }
    if variants not in ("all", "cli"):
        raise ValueError(f"'variants' must be 'all' or 'cli' (got {variants!r})")
    config |= {"access": access, "feature_cache": feature_cache}
    config |= {"feature_reads": feature_reads, "cache_policy": cache_policy}
    ours = ["graphengine", "graphengine_user", "graphengine_uncached"]
    if variants == "cli":
        ours = ours[:1]
    libraries = [*ours, *(p for p in ("pyg", "dgl") if p in vs)]
    results = {library: [] for library in libraries}
    errors = {}
    for round_ in range(rounds):
        for library in libraries:
            if library in errors:
                continue
            # Accuracy once per model: the library user's trains the same one as graphengine's.
            trains = round_ == 0 and library in ("graphengine", "pyg", "dgl")
            done = _run_process(
                {
                    **config,
                    "library": library,
                    "epochs": epochs if trains else 0,
                    "profile": profile if round_ == 0 and library == "graphengine" else 0,
                }
            )
            if "error" in done:
                errors[library] = done["error"]
                log.warning("%s", done["error"])
            else:
                results[library].append(done)
                log.info("round %d, %s: %.3f s/step", round_ + 1, library, done["step_s"])
    rows, summary = _report(results, errors, config, rounds, batches_per_epoch)
    ours = results["graphengine"]
    stages = {k: statistics.mean(r["stages"][k] for r in ours) for k in ours[0]["stages"]}
    wall = statistics.mean(r["wall"] for r in ours)
    slowest = max(stages, key=lambda k: stages[k] if k != "waiting" else -1)
    summary.update(
        stage_s=stages,
        slowest_stage=slowest,
        wall_over_slowest=wall / stages[slowest],
        overlap=sum(v for k, v in stages.items() if k != "waiting") / wall,
        waiting_share=stages["waiting"] / wall,
        step_over_compute=wall / stages["compute"],
    )
    stage_rows = [
        [f"  stage: {k}", v / batches, "", v / batches * batches_per_epoch, "", "", "", ""]
        for k, v in stages.items()
    ]
    headers = [
        "run",
        "s/step (median)",
        "min-max",
        "epoch s (extrapolated)",
        "graphengine vs it",
        "library user vs it",
        "peak RSS GB (median)",
        "test acc",
    ]
    profile_rows = _profile_rows(ours[0].get("profile"), summary)
    disk_rows = _disk_rows(ours, summary)
    print_report(headers, rows + stage_rows + disk_rows + profile_rows, summary)
    if plot is not None:
        from graphengine.plot import plot_step

        plot_step(summary, plot)
    return summary


def _disk_rows(ours: list[dict], summary: dict) -> list[list]:
    """Rows of graphengine's reads from disk a step (the mean over rounds) and its feature
    cache's hit rate; both into ``summary``."""
    per_step = [r["io_per_step"] for r in ours]
    io = {
        key: statistics.mean(step[key] for step in per_step)
        if all(step[key] is not None for step in per_step)
        else None
        for key in per_step[0]
    }
    summary["io_per_step"] = io
    rows = [["  disk: major faults/step", io["major_faults"], "", "", "", "", "", ""]]
    if io["read_bytes"] is not None:
        rows.append(["  disk: MB read/step", io["read_bytes"] / 1e6, "", "", "", "", "", ""])
    cache = ours[0].get("feature_cache")
    if cache is not None:
        summary["feature_cache"] = cache
        label = f"  feature cache ({cache['rows']} rows, {cache['policy']}): hit rate"
        rows.append([label, cache["hit_rate"], "", "", "", "", "", ""])
    return rows


def _profile_rows(profile: dict | None, summary: dict) -> list[list]:
    """Rows of the compute profile (seconds a step and share per category) and its summary
    entry ``step_profile`` with ``step_over_dense``; none without a profile."""
    if profile is None:
        return []
    dense = profile["dense_products_s"]
    summary["step_profile"] = {**profile, "step_over_dense": summary["step_s"] / dense}
    rows = [
        [
            f"  compute profile: {name}",
            profile[f"{name}_s"],
            f"{profile[f'{name}_s'] / profile['profiled_s']:.0%}",
        ]
        + [""] * 5
        for name in CATEGORIES
    ]
    rows.append(["  step over its dense products", f"{summary['step_s'] / dense:.2f}x"] + [""] * 6)
    return rows


def _run_process(config: dict) -> dict:
    """One library's loop in a fresh Python process: its JSON line, as a dict."""
    command = [sys.executable, "-m", "graphengine.bench.train", json.dumps(config)]
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(
            f"the {config['library']} process exited with {done.returncode} (its log is above)"
        )
    return json.loads(done.stdout.splitlines()[-1])


def _report(
    results: dict, errors: dict, config: dict, rounds: int, batches_per_epoch: int
) -> tuple[list[list], dict]:
    """The table's rows, one per library (one that could not run says why in its last
    column), and the summary: per library its median, min, max and per-round seconds a
    step, and the ratios of medians of graphengine (``speedup_vs_*``) and of its library
    user (``user_speedup_vs_*``) over each other row."""
    first = results["graphengine"][0]
    medians = {k: statistics.median(r["step_s"] for r in v) for k, v in results.items() if v}
    ours, user = medians["graphengine"], medians.get("graphengine_user")  # None: variants cli
    summary = {
        "bench": "train",
        "dataset": config["dataset"],
        "model": f"{config['model']}-{len(config['fanouts'])}x{config['hidden']}",
        "fanouts": config["fanouts"],
        "batch_size": config["batch_size"],
        "batches": config["batches"],
        "threads": config["threads"],
        "device": config["device"],
        "sample_on": config["sample_on"],
        "rounds": rounds,
        "allocator_tuned": first["allocator_tuned"],
        "forward": first["forward"],
        "precision": config["precision"],
        "step_s": ours,
        "epoch_s": ours * batches_per_epoch,
        "user_step_s": user,
        "peers_allocator_tuned": config["tune_peers"],
        "step_s_by_library": {},
    }
    names = {
        "forward": first["forward"],
        "num_workers": "?",
        "dgl_layer": DGL_LAYERS[config["model"]],
    }
    if results.get("pyg"):
        names["num_workers"] = results["pyg"][0]["num_workers"]
        summary["pyg_num_workers"] = names["num_workers"]
    rows = []
    for library in results:
        label = LIBRARIES[library].format(**names)
        if library in ("pyg", "dgl") and config["tune_peers"]:
            label += ", allocator tuned"
        if library.startswith("graphengine") and config["precision"] != "fp32":
            label += f" [{config['precision']}]"
        if library in errors:
            summary[library] = errors[library]
            rows.append([f"{label} (not run)", *["-"] * 6, errors[library]])
            continue
        steps = [r["step_s"] for r in results[library]]
        median = medians[library]
        peak_rss = statistics.median(r["peak_rss_gb"] for r in results[library])
        summary["step_s_by_library"][library] = {
            "median": median,
            "min": min(steps),
            "max": max(steps),
            "rounds": steps,
            "peak_rss_gb": peak_rss,
        }
        accuracy = results[library][0].get("test_acc", "")
        if accuracy != "":
            summary["test_acc" if library == "graphengine" else f"{library}_test_acc"] = accuracy
        if library in ("pyg", "dgl"):
            summary[f"{library}_epoch_s"] = median * batches_per_epoch
            summary[f"speedup_vs_{library}"] = median / ours
            if user is not None:
                summary[f"user_speedup_vs_{library}"] = median / user
        rows.append(
            [
                label,
                median,
                f"{min(steps):.3g}-{max(steps):.3g}",
                median * batches_per_epoch,
                f"{median / ours:.2f}x" if library != "graphengine" else "",
                f"{median / user:.2f}x" if library in ("pyg", "dgl") and user else "",
                peak_rss,
                accuracy,
            ]
        )
    return rows, summary


def process(config: dict) -> dict:
    """Run one library's loop (``config["library"]``, a key of :data:`LIBRARIES`) here:
    its ``step_s``, graphengine's stage times, and its ``test_acc`` when ``config["epochs"]``
    is set; or ``{"error": why}`` where the library cannot run here."""
    library, epochs = config["library"], config["epochs"]
    set_threads(config["threads"])
    device = torch.device(config["device"])
    dataset = load_dataset(config["dataset"], root=config["root"])
    shape = (config["model"], dataset, config["fanouts"], config["batch_size"], config["hidden"])
    if library.startswith("graphengine"):
        if config["access"] is not None:
            dataset.advise(config["access"])
        choose_feature_reads(
            dataset,
            config.get("feature_reads", "auto"),
            config.get("cache_policy", DEFAULT_CACHE_POLICY),
        )
    seed = config["seed"]
    if library.startswith("graphengine"):
        tuned = library == "graphengine" and tune_host_allocator()
        set_host_memory_cache(library != "graphengine_uncached")
        out = _graphengine_steps(
            *shape,
            config["batches"],
            seed,
            config["forward"],
            device,
            config["precision"],
            config["profile"],
            config["feature_cache"],
            config["sample_on"],
        )
        out["allocator_tuned"] = tuned
        if epochs:
            out["test_acc"] = _accuracy_graphengine(
                *shape, epochs, seed, device, config["precision"]
            )
        return out
    if config["tune_peers"]:
        tune_host_allocator()
    steps, accuracy = {
        "pyg": (_pyg_steps, _accuracy_pyg),
        "dgl": (train_dgl.steps, train_dgl.accuracy),
    }[library]
    try:
        out = steps(*shape, config["batches"], seed, device)
        out["peak_rss_gb"] = _peak_rss_gb()
        if epochs:
            out["test_acc"] = accuracy(*shape, epochs, seed, device)
        return out
    except Unavailable as error:
        return {"error": str(error)}


def _peak_rss_gb() -> float:
    """The process's peak resident memory so far, in GB (Linux reports ``ru_maxrss`` in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9


def _model(kind, dataset, hidden, num_layers, seed) -> torch.nn.Module:
    """PyG's model of ``kind`` (one of :data:`~graphengine.bench.train_dgl.MODELS`), seeded:
    ``GraphSAGE``, ``GAT`` with 4 heads (as DGL's loop has), or ``GCN``."""
    torch.manual_seed(seed)
    sizes = (dataset.num_features, hidden, num_layers, dataset.num_classes)
    if kind == "gat":
        return GAT(*sizes, heads=train_dgl.GAT_HEADS)
    return {"sage": GraphSAGE, "gcn": GCN}[kind](*sizes)


def _trainer(
    kind, dataset, fanouts, batch_size, hidden, seed, device, precision, **options
) -> Trainer:
    """A Trainer of a fresh, seeded model of ``kind`` (``options``: more Trainer arguments)."""
    model = _model(kind, dataset, hidden, len(fanouts), seed)
    return Trainer(
        model,
        dataset,
        fanouts,
        batch_size,
        seed=seed,
        progress=False,
        device=device,
        precision=precision,
        **options,
    )


def _graphengine_steps(
    kind,
    dataset,
    fanouts,
    batch_size,
    hidden,
    batches,
    seed,
    forward,
    device,
    precision="fp32",
    profiled=0,
    feature_cache=None,
    sample_on=None,
) -> dict:
    """Times ``batches`` steps of a pass, after its first step (which compiles the kernels
    and warms the pass's host cache, as each peer's first step does in its timed pass);
    stage times are those spent while the timed steps ran. With ``profiled``, that many more
    steps run under torch.profiler on batches loaded beforehand (the compute alone), after a
    warm-up step in the same host-cache span (whose first step maps its buffers afresh, as the
    timed pass's first step did): :func:`~graphengine.bench.step_profile.profile_steps`'s
    breakdown as ``profile``. The timed steps' disk reads and page faults, a step, are
    ``io_per_step``; with a ``feature_cache``, its counts are ``feature_cache``."""
    trainer = _trainer(
        kind,
        dataset,
        fanouts,
        batch_size,
        hidden,
        seed,
        device,
        precision,
        eval_mode="sampled",
        forward=forward,
        feature_cache=feature_cache,
    )
    seeds = np.random.default_rng(seed).permutation(np.asarray(dataset.train_idx))
    on_device = {"device": device, "pin_memory": device.type == "cuda", "sample_on": sample_on}
    store = trainer.batches.features.store
    loader = NeighborLoader(
        (store, dataset.graph) if store is not None else dataset,
        fanouts,
        batch_size=batch_size,
        input_nodes=seeds[: (batches + 1) * batch_size],
        seed=seed,
        num_workers=1,
        **on_device,
    )
    trainer.model.train()
    passing = iter(loader)
    trainer.step(next(passing))  # in the timed pass, as the peers warm up in theirs
    warmed = loader.stage_times
    compute = 0.0
    cache = trainer.batches.features.cache
    if cache is not None:
        cache.epoch_metrics()  # the timed steps' counts from here
    io_start = IoCounters.now()
    start = time.perf_counter()
    for batch in passing:
        step_start = time.perf_counter()
        trainer.step(batch)
        compute += time.perf_counter() - step_start
    wall = time.perf_counter() - start
    io = IoCounters.now().since(io_start)
    stages = {name: seconds - warmed.get(name, 0.0) for name, seconds in loader.stage_times.items()}
    stages["compute"] = compute
    out = {
        "step_s": wall / batches,
        "wall": wall,
        "stages": stages,
        "forward": trainer.forward_mode,
        "peak_rss_gb": _peak_rss_gb(),
        "io_per_step": {k: v / batches if v is not None else None for k, v in io.items()},
    }
    if cache is not None:
        out["feature_cache"] = cache.epoch_metrics()
    if profiled:
        first = (batches + 1) * batch_size
        extra = NeighborLoader(
            (store, dataset.graph) if store is not None else dataset,
            fanouts,
            batch_size=batch_size,
            input_nodes=seeds[first : first + (profiled + 1) * batch_size],
            seed=seed,
            num_workers=0,
            **on_device,
        )
        with host_memory_cache():
            warm_up, *profiled_batches = list(extra)
            trainer.step(warm_up)
            out["profile"] = profile_steps(trainer.step, profiled_batches)
    return out


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


def _pyg_steps(kind, dataset, fanouts, batch_size, hidden, batches, seed, device) -> dict:
    pyg_sampling()
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
    model = _model(kind, dataset, hidden, len(fanouts), seed).to(device)
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


def _accuracy_graphengine(
    kind, dataset, fanouts, batch_size, hidden, epochs, seed, device, precision
) -> float:
    trainer = _trainer(kind, dataset, fanouts, batch_size, hidden, seed, device, precision)
    trainer.fit(epochs, eval_every=epochs)
    return trainer.evaluate("test")


def _accuracy_pyg(kind, dataset, fanouts, batch_size, hidden, epochs, seed, device) -> float:
    """Trains through PyG's loader; tests with the Trainer's evaluation (exact full-neighbor
    inference, layer-wise on large graphs), the same as for graphengine's model."""
    data = dataset.to_data()
    model = _model(kind, dataset, hidden, len(fanouts), seed).to(device)
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


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    sys.stdout.write(json.dumps(process(json.loads(sys.argv[1]))) + "\n")
