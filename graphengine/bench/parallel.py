"""``graphengine bench train --parallel hybrid --nproc N``: hybrid (P3) against data parallelism.

For each feature width and hidden width, ``N`` workers (torchrun, gloo) train the same
GraphSAGE on the same batches with ``--parallel data`` and with ``--parallel hybrid``
(:mod:`graphengine.bench.parallel_worker`): one untimed epoch over ``steps`` global batches,
then one timed. Measured per step and worker: bytes sent to other workers, feature bytes
gathered, seconds in exchanges; the feature memory a worker holds; the epoch time
extrapolated to the whole training split.

Projection to more workers, per worker and step, from the batch sizes each worker would
sample (measured here by sampling ``B / W`` seeds) and the formulas the measured counters
follow (:func:`graphengine.plan.volumes.traffic_formulas`, checked against them at ``N``):

- data parallel with the features partitioned by rows over ``W`` machines (DistDGL without a
  cache): ``(W-1)/W * n_src * F * 4`` bytes of remote rows, plus the gradients'
  ring all-reduce ``2 (W-1)/W * 4 P``;
- hybrid: the structure to ``W-1`` peers ``(W-1) (8 n_src + 4 E + 4 (n_dst + 1) + 24)``, the
  partial results forward and their gradients backward ``2 (W-1) * n_dst * H * 4``, plus the
  all-reduce of the parameters after the first layer's weights.

``n_src``: a worker's batch nodes, ``n_dst``: its first layer's destinations (all hops but the
last), ``E``: its edges, ``F``/``H``: feature/hidden width, ``P``: parameters. Seconds are
these bytes over a ``link_gbps`` link; compute is not projected.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from graphengine.bench.report import print_report
from graphengine.datasets import load_dataset
from graphengine.distributed.launch import numba_threads_env
from graphengine.nn.models import build_model
from graphengine.plan.volumes import traffic_formulas
from samplers import NeighborSampler, SamplerInput

log = logging.getLogger(__name__)

PROJECTED_WORKERS = (2, 8, 16)


def run(
    dataset_name: str,
    widths: list[int],
    hiddens: list[int],
    fanouts: list[int],
    batch_size: int,
    steps: int,
    nproc: int,
    root: str | None = None,
    link_gbps: float = 10.0,
) -> dict:
    if batch_size % nproc:
        raise ValueError(f"'batch_size' {batch_size} must be a multiple of --nproc {nproc}")
    measured, projected = [], []
    for width in widths:
        dataset = load_dataset(dataset_name, root, num_features=width)  # generated once here
        sizes = sorted({*PROJECTED_WORKERS, nproc})
        counts = {w: _batch_counts(dataset, fanouts, batch_size // w) for w in sizes}
        for hidden in hiddens:
            params = _parameter_counts(dataset, hidden, len(fanouts))
            runs = {}
            for parallel in ("data", "hybrid"):
                config = {
                    "dataset": dataset_name,
                    "root": root,
                    "width": width,
                    "hidden": hidden,
                    "fanouts": fanouts,
                    "batch_size": batch_size,
                    "steps": steps,
                    "parallel": parallel,
                    "model": "sage",
                }
                runs[parallel] = _launch(config, nproc)
                measured.append(_measured_row(width, hidden, parallel, runs[parallel], nproc))
            for workers in PROJECTED_WORKERS:
                projected.append(
                    _projected_row(width, hidden, workers, counts[workers], params, link_gbps)
                )
            measured[-2]["check"] = _check_formulas(runs, counts[nproc], params, width, hidden)
            measured[-1]["check"] = measured[-2]["check"]
    _print(measured, projected, nproc, link_gbps)
    summary = {
        "bench": "train-parallel",
        "dataset": dataset_name,
        "workers": nproc,
        "fanouts": fanouts,
        "batch_size": batch_size,
        "steps": steps,
        "link_gbps": link_gbps,
        "measured": measured,
        "projected": projected,
    }
    sys.stdout.write(json.dumps(summary) + "\n")
    return summary


def _launch(config: dict, nproc: int) -> list[dict]:
    """Every worker's report of one configuration."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report"
        command = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc-per-node={nproc}",
            "-m",
            "graphengine.bench.parallel_worker",
            json.dumps(config),
            str(out),
        ]
        log.info("%s %s, F=%d, H=%d", config["parallel"], nproc, config["width"], config["hidden"])
        env = {**os.environ, **numba_threads_env(nproc)}
        done = subprocess.run(command, capture_output=True, text=True, env=env)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
        return [json.loads(Path(f"{out}.{rank}").read_text()) for rank in range(nproc)]


def _measured_row(width: int, hidden: int, parallel: str, reports: list, nproc: int) -> dict:
    """Per worker and step (the traffic counters are summed over the workers)."""
    steps = reports[0]["steps"]
    traffic = reports[0]["traffic"]
    per = steps * nproc
    epoch_s = max(r["epoch_s"] for r in reports)
    return {
        "width": width,
        "hidden": hidden,
        "parallel": parallel,
        "epoch_s": epoch_s * reports[0]["full_epoch_steps"] / steps,
        "s_per_step": epoch_s / steps,
        "sent_mb_per_step": traffic["moved_bytes"] / per / 1e6,
        "feature_mb_per_step": traffic["feature_bytes"] / per / 1e6,
        "exchange_s_per_step": traffic["exchange_seconds_per_worker"] / steps,
        "feature_held_mb": reports[0]["feature_held_bytes"] / 1e6,
        "peak_rss_mb": max(r["peak_rss_bytes"] for r in reports) / 1e6,
        "traffic": traffic,
    }


def _batch_counts(dataset, fanouts: list[int], seeds: int, batches: int = 5) -> dict:
    """Mean ``n_src``, ``n_dst`` and ``E`` of batches of ``seeds`` training nodes."""
    graph = dataset.graph
    sampler = NeighborSampler(graph.indptr, graph.indices, fanouts)
    rng = np.random.default_rng(1)
    totals = np.zeros(3)
    for b in range(batches):
        nodes = rng.choice(dataset.train_idx, seeds, replace=False)
        out = sampler.sample_from_nodes(SamplerInput(node=nodes, input_id=np.arange(seeds), seed=b))
        n_dst = sum(out.num_sampled_nodes[:-1])
        totals += (len(out.node), n_dst, len(out.row))
    n_src, n_dst, edges = totals / batches
    return {"n_src": n_src, "n_dst": n_dst, "edges": edges}


def _parameter_counts(dataset, hidden: int, layers: int) -> dict:
    """GraphSAGE's parameters in all, and those after the first layer's weights."""
    model = build_model("sage", dataset.num_features, hidden, dataset.num_classes, layers)
    total = sum(p.numel() for p in model.parameters())
    first = model.convs[0]
    weights = first.lin_l.weight.numel() + first.lin_r.weight.numel()
    return {"all": total, "after_first_weights": total - weights}


def _check_formulas(runs: dict, counts: dict, params: dict, width: int, hidden: int) -> dict:
    """The formulas at the measured worker count against the measured counters (ratios)."""
    nproc = len(runs["hybrid"])
    formula = traffic_formulas(nproc, counts, params, width, hidden)
    traffic = runs["hybrid"][0]["traffic"]
    per = runs["hybrid"][0]["steps"] * nproc
    return {
        "structure_measured_over_formula": traffic["structure_sent_bytes"]
        / per
        / formula["hybrid_structure"],
        "partials_measured_over_formula": traffic["partial_sent_bytes"]
        / per
        / formula["hybrid_partials"],
    }


def _projected_row(
    width: int, hidden: int, workers: int, counts: dict, params: dict, link_gbps: float
) -> dict:
    f = traffic_formulas(workers, counts, params, width, hidden)
    data = f["data_remote_features"] + f["data_gradients"]
    hybrid = f["hybrid_structure"] + f["hybrid_partials"] + f["hybrid_gradients"]
    link = link_gbps * 1e9 / 8
    return {
        "width": width,
        "hidden": hidden,
        "workers": workers,
        "n_src": counts["n_src"],
        "n_dst": counts["n_dst"],
        "data_mb": data / 1e6,
        "hybrid_mb": hybrid / 1e6,
        "data_s": data / link,
        "hybrid_s": hybrid / link,
        "fewer_bytes": "hybrid" if hybrid < data else "data",
    }


def _print(measured: list, projected: list, nproc: int, link_gbps: float) -> None:
    sys.stdout.write(f"measured, {nproc} workers on this machine (per worker and step):\n")
    print_report(
        [
            "F",
            "H",
            "mode",
            "epoch s",
            "s/step",
            "sent MB",
            "features MB",
            "exchange s",
            "features held MB",
            "peak RSS MB",
        ],
        [
            [
                m["width"],
                m["hidden"],
                m["parallel"],
                m["epoch_s"],
                m["s_per_step"],
                m["sent_mb_per_step"],
                m["feature_mb_per_step"],
                m["exchange_s_per_step"],
                m["feature_held_mb"],
                m["peak_rss_mb"],
            ]
            for m in measured
        ],
        None,
    )
    sys.stdout.write(
        f"\nprojected bytes sent per worker and step (data: features partitioned by rows; "
        f"seconds at {link_gbps:g} Gb/s):\n"
    )
    print_report(
        ["F", "H", "W", "n_src", "n_dst", "data MB", "hybrid MB", "data s", "hybrid s", "fewer"],
        [
            [
                p["width"],
                p["hidden"],
                p["workers"],
                int(p["n_src"]),
                int(p["n_dst"]),
                p["data_mb"],
                p["hybrid_mb"],
                p["data_s"],
                p["hybrid_s"],
                p["fewer_bytes"],
            ]
            for p in projected
        ],
        None,
    )
