"""``graphengine bench plan``: the planner's choice and predictions against every candidate
run for real on an emulated cluster (:mod:`graphengine.distributed.emulated_cluster`).

For every host count ``K``, link and feature width ``F`` and hidden width ``H``:

1. ``graphengine plan`` under torchrun on the ``K`` hosts (one worker a host), its last
   stdout line on host 0 the plan's JSON: ``choice`` and per candidate ``epoch_s``;
2. every candidate trained for real by ``graphengine train`` under torchrun on the hosts,
   ``--epochs E --eval-every 0``: ``data`` (``--parallel data``) and ``hybrid`` (``--parallel
   hybrid``) with every host holding its own full copy of the dataset, ``partitioned``
   (``--parallel data --partitions``) and ``hybrid-partitioned`` (``--parallel hybrid
   --partitions``) with every host holding only its own part
   (:meth:`~graphengine.distributed.emulated_cluster.EmulatedCluster.copy_partition`). The
   measured epoch is the mean ``epoch_s`` of the epochs after the first (with ``E = 2``,
   the second's): the first compiles the Numba kernels and warms the caches, and the
   steady state is what the planner predicts.

The links: ``fast`` is what this machine pushes through the bridge between two namespaces
(measured by a timed bulk TCP transfer between two hosts whose links are shaped far above
it, :func:`measure_link`), and the fast configurations run on such links (or, given
``--fast-mbit``, links shaped to that rate); ``slow`` is a ``--slow-factor``-th of the fast
rate, set with ``tbf``.

The dataset is the catalog's synthetic-products generated smaller (``--nodes``; edges,
training and validation nodes in its proportions, 47 classes), one store per width, and
partitioned with ``graphengine partition`` (METIS) once per host count and width.

Every run's record (the plan's JSON, each epoch's JSON line and the final one, or the error
of a run that failed) is appended to ``--out`` as one JSON line as soon as it ends, so that
a partial run is not lost. The arithmetic of the report is :mod:`.plan_stats`.

``--accuracy`` also evaluates every candidate after its last epoch (``--eval-every E --eval
sampled``: the epochs' ``epoch_s`` do not include it) and trains once on one machine per
``(F, H)`` for the same epochs, evaluated alike: each candidate's ``test_acc`` minus the
single machine's, in points.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from graphengine.bench.plan_stats import CANDIDATES, LINKS, compare, summarize
from graphengine.bench.report import print_report
from graphengine.data.output_files import append_line
from graphengine.datasets.catalog import SYNTHETIC
from graphengine.datasets.dataset import GraphDataset
from graphengine.datasets.synthetic import generate
from graphengine.distributed.emulated_cluster import MASTER_PORT, EmulatedCluster, Link
from graphengine.plan.candidates import CANDIDATES as PLAN_CANDIDATES

log = logging.getLogger(__name__)

# The fast links' tbf rate, far above what a bridge between namespaces carries here (the
# measured rate is reported as theirs): the machine, not the shaping, limits them.
UNSHAPED_MBIT = 100_000.0
TRANSFER_BYTES = 500_000_000
TRANSFERS = 3
ONE_THREAD = {"OMP_NUM_THREADS": "1"}
# --accuracy evaluates every run the one way every candidate can (hybrid evaluates only
# sampled mini-batches), so that the gaps are the training's, not the evaluations'.
EVALUATION = "sampled"


@dataclass(frozen=True)
class BenchConfig:
    """What ``graphengine bench plan`` runs (the CLI's options)."""

    hosts: list[int]
    links: list[str]
    widths: list[int]
    hiddens: list[int]
    candidates: list[str]
    nodes: int = 2**16
    fanouts: list[int] = dataclasses.field(default_factory=lambda: [10, 5])
    batch_size: int = 1200
    epochs: int = 2
    model: str = "sage"
    slow_factor: float = 10.0
    fast_mbit: float | None = None
    accuracy: bool = False
    out: str = "bench-plan.jsonl"
    work: str | None = None
    subnet: int = 50
    run_timeout_s: float = 600.0
    dist_timeout_s: float = 120.0

    def __post_init__(self):
        unknown = [c for c in self.candidates if c not in CANDIDATES]
        if unknown or not self.candidates:
            raise ValueError(f"'candidates' must be among {CANDIDATES} (got {self.candidates})")
        if [link for link in self.links if link not in LINKS] or not self.links:
            raise ValueError(f"'links' must be among {LINKS} (got {self.links})")
        for k in self.hosts:
            if k < 2:
                raise ValueError(f"'hosts' must each be at least 2 (got {self.hosts})")
            if self.batch_size % k:
                raise ValueError(
                    f"'batch_size' {self.batch_size} must be a multiple of every host count "
                    f"(got hosts {self.hosts})"
                )
        if self.epochs < 2:
            raise ValueError(
                f"'epochs' must be at least 2 (got {self.epochs}): the first compiles the "
                "kernels, the later ones are measured"
            )
        if not self.slow_factor > 1:
            raise ValueError(f"'slow_factor' must be above 1 (got {self.slow_factor})")


def run(config: BenchConfig) -> dict:
    """Run the bench (module docstring), print its tables and JSON line; returns the
    summary."""
    started = time.monotonic()
    _build_extension()
    with tempfile.TemporaryDirectory(prefix="bench-plan-") as scratch:
        work = Path(config.work) if config.work else Path(scratch)
        out = Path(config.out)
        raw = RawResults(out)
        raw.append({"kind": "config", **dataclasses.asdict(config)})
        stores = {width: _store(config, work / "data", width) for width in config.widths}
        fast_mbit = config.fast_mbit or measure_link(work / "link", config.subnet, raw)
        rates = {"fast": fast_mbit, "slow": fast_mbit / config.slow_factor}
        singles = _single_machine(config, stores, raw) if config.accuracy else {}
        comparisons = []
        for hosts in config.hosts:
            parts = {}
            if any(PLAN_CANDIDATES[c].partitioned for c in config.candidates):
                parts = {w: _partition(stores[w], hosts, work / "parts") for w in config.widths}
            for link_name in config.links:
                # A measured fast rate is the machine's own limit: nothing is shaped to it.
                shaped = rates[link_name]
                if link_name == "fast" and config.fast_mbit is None:
                    shaped = UNSHAPED_MBIT
                setting = {"hosts": hosts, "link": link_name, "rate_mbit": rates[link_name]}
                raw.append({"kind": "cluster", **setting, "tbf_mbit": shaped})
                comparisons += _on_cluster(
                    config, setting, Link(rate_mbit=shaped), stores, parts, work, raw, singles
                )
    summary = {
        "bench": "plan",
        "nodes": config.nodes,
        "fanouts": config.fanouts,
        "batch_size": config.batch_size,
        "epochs": config.epochs,
        "model": config.model,
        "accuracy": config.accuracy,
        "fast_mbit": fast_mbit,
        "slow_mbit": rates["slow"],
        "raw": str(out),
        "seconds": time.monotonic() - started,
        **summarize([c["comparison"] for c in comparisons]),
    }
    if config.accuracy:
        gaps = [g for c in comparisons for g in c["accuracy_gap_points"].values() if g is not None]
        summary["accuracy_worst_gap_points"] = max(map(abs, gaps)) if gaps else None
    summary["results"] = [_flat(result) for result in comparisons]
    print_tables(comparisons, summary)
    raw.append({"kind": "summary", **summary})
    return summary


def _build_extension() -> None:
    """Build the C++ extension here, once, before any host needs it: else the first run
    on every host compiles it at once, and that run's epochs are not what is measured."""
    from graphengine import ops

    if not ops.build_extension():
        log.warning("the extension did not build (%s): runs use the fallbacks", ops.build_error())


class RawResults:
    """The ``--out`` file: one JSON line a record, appended and flushed as each run ends."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path

    def append(self, record: dict) -> None:
        append_line(self.path, json.dumps(record))


def bench_spec(nodes: int, width: int):
    """synthetic-products' spec at ``nodes`` nodes and ``width`` features: its edges per
    node, training and validation shares and classes."""
    products = SYNTHETIC["synthetic-products"]
    share = nodes / products.num_nodes
    return dataclasses.replace(
        products,
        num_nodes=nodes,
        num_edges=round(products.num_edges * share),
        num_features=width,
        num_train=round(products.num_train * share),
        num_val=round(products.num_val * share),
    )


def _store(config: BenchConfig, folder: Path, width: int) -> Path:
    """The store of the bench's dataset at ``width`` features, generated on first use."""
    name = f"bench-plan-n{config.nodes}-x{width}"
    path = folder / name
    if not (path / "dataset.json").is_file():
        log.info("generating %s", path)
        generate(name, bench_spec(config.nodes, width)).save(path)
    GraphDataset.load(path)  # a half-written store fails here, not in every host
    return path


def _partition(store: Path, parts: int, folder: Path) -> Path:
    """``graphengine partition`` of ``store`` into ``parts`` parts (reused if there)."""
    out = folder / f"{store.name}-k{parts}"
    if (out / "partition.json").is_file():
        return out
    command = [sys.executable, "-m", "graphengine", "partition", "--dataset", str(store)]
    command += ["--parts", str(parts), "--out", str(out), "--force"]
    done = subprocess.run(command, capture_output=True, text=True, env=_env())
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {last_error_line(done.stderr)}")
    return out


def measure_link(folder: Path, subnet: int, raw: RawResults) -> float:
    """The most Mbit/s a bulk TCP transfer pushes from one emulated host to another over
    links shaped far above it: the best of :data:`TRANSFERS` transfers of
    :data:`TRANSFER_BYTES` bytes."""
    seconds = []
    with EmulatedCluster(2, folder, Link(rate_mbit=UNSHAPED_MBIT), subnet=subnet) as cluster:
        source, target = cluster.hosts
        for _ in range(TRANSFERS):
            seconds.append(cluster.transfer_seconds(source, target, TRANSFER_BYTES))
    mbit = TRANSFER_BYTES * 8 / min(seconds) / 1e6
    raw.append({"kind": "link", "bytes": TRANSFER_BYTES, "seconds": seconds, "mbit": mbit})
    log.info("the bridge carries %.0f Mbit/s (best of %s s)", mbit, seconds)
    return mbit


_PORTS = itertools.count()


def _on_cluster(
    config: BenchConfig,
    setting: dict,
    link: Link,
    stores: dict[int, Path],
    parts: dict[int, Path],
    work: Path,
    raw: RawResults,
    singles: dict,
) -> list[dict]:
    """Every width and hidden width's plan and candidate runs on one cluster."""
    hosts = setting["hosts"]
    folder = work / f"cluster-k{hosts}-{setting['link']}"
    results = []
    with EmulatedCluster(hosts, folder, link, subnet=config.subnet) as cluster:
        for width in config.widths:
            for host in cluster.hosts:
                cluster.copy_to_host(host, stores[width])
            copies = cluster.copy_partition(parts[width], name=parts[width].name) if parts else []
            for hidden in config.hiddens:
                key = {**setting, "width": width, "hidden": hidden}
                data = {"store": stores[width].name, "parts": copies}
                results.append(_configuration(config, cluster, key, data, raw, singles))
    return results


def _configuration(
    config: BenchConfig, cluster: EmulatedCluster, key: dict, data: dict, raw, singles
) -> dict:
    """One configuration's plan, candidate runs and comparison."""
    log.info("configuration %s", key)
    plan = _plan(config, cluster, key, data)
    raw.append({"kind": "plan", **key, **plan})
    choice, predicted = read_plan(plan.get("plan"))
    runs = {}
    for candidate in config.candidates:
        runs[candidate] = _train(config, cluster, key, data, candidate)
        raw.append({"kind": "train", **key, "candidate": candidate, **runs[candidate]})
    measured = {name: r.get("epoch_s") for name, r in runs.items()}
    comparison = compare(measured, predicted, choice)
    result = {"key": key, "comparison": comparison, "plan_error": plan.get("error")}
    result["plan_s"] = plan.get("seconds")
    result["errors"] = {name: r["error"] for name, r in runs.items() if "error" in r}
    if config.accuracy:
        single = singles.get((key["width"], key["hidden"]))
        result["accuracy_gap_points"] = {
            name: (r["test_acc"] - single) * 100
            if r.get("test_acc") is not None and single is not None
            else None
            for name, r in runs.items()
        }
    raw.append({"kind": "configuration", **_flat(result)})
    return result


def _flat(result: dict) -> dict:
    """A configuration's result as one JSON object: its key, its comparison, the plan's
    seconds, the errors (and accuracy gaps)."""
    flat = {**result["key"], **result["comparison"], "plan_s": result["plan_s"]}
    flat["errors"] = {**result["errors"]}
    if result["plan_error"] is not None:
        flat["errors"]["plan"] = result["plan_error"]
    if "accuracy_gap_points" in result:
        flat["accuracy_gap_points"] = result["accuracy_gap_points"]
    return flat


def read_plan(plan: dict | None) -> tuple[str | None, dict[str, float]]:
    """The choice and each candidate's predicted ``epoch_s`` from the plan's JSON
    (``{"choice", "candidates": [{"name", "epoch_s", ...}], ...}``); ``(None, {})``
    without a plan."""
    if plan is None:
        return None, {}
    predicted = {c["name"]: float(c["epoch_s"]) for c in plan["candidates"]}
    return plan["choice"], predicted


def _model_args(config: BenchConfig, hidden: int) -> list:
    """The model and batch arguments ``graphengine plan`` and ``train`` both take."""
    args = ["--model", config.model, "--hidden", hidden]
    args += ["--fanouts", ",".join(map(str, config.fanouts))]
    return [*args, "--batch-size", config.batch_size]


def _data_args(host, data: dict, partitioned: bool) -> list:
    """Where ``host``'s command reads its data: its parts, or its copy of the dataset."""
    if partitioned:
        return ["--partitions", data["parts"][host.rank]]
    return ["--dataset", host.data_dir / data["store"]]


def _plan(config: BenchConfig, cluster: EmulatedCluster, key: dict, data: dict) -> dict:
    """``graphengine plan`` on the hosts: ``{"plan": its JSON}`` or ``{"error": ...}``."""

    def args_for(host) -> list:
        args = ["-m", "graphengine", "plan", *_data_args(host, data, partitioned=False)]
        if data["parts"]:
            args += _data_args(host, data, partitioned=True)
        args += ["--dist-timeout", config.dist_timeout_s]
        return args + _model_args(config, key["hidden"])

    done = _torchrun(config, cluster, args_for)
    if "error" in done:
        return done
    try:
        plan = json.loads(done["stdout"].strip().splitlines()[-1])
        read_plan(plan)
    except (IndexError, ValueError, KeyError, TypeError) as error:
        return {"error": f"no plan JSON in its last stdout line ({error!r})", **done}
    return {"plan": plan, "seconds": done["seconds"]}


def _train(
    config: BenchConfig, cluster: EmulatedCluster, key: dict, data: dict, candidate: str
) -> dict:
    """One candidate's ``graphengine train`` on the hosts: ``epoch_s`` (the last epoch's),
    every JSON line, ``test_acc`` with ``--accuracy``; or ``error``."""
    evaluate = ["--eval-every", 0]
    if config.accuracy:
        evaluate = ["--eval-every", config.epochs, "--eval", EVALUATION]

    def args_for(host) -> list:
        # The planner's candidate says how it trains: its mode, on a copy or on the parts.
        mode = PLAN_CANDIDATES[candidate]
        args = ["-m", "graphengine", "train", "--parallel", mode.parallel]
        args += _data_args(host, data, mode.partitioned)
        args += _model_args(config, key["hidden"])
        args += ["--epochs", config.epochs, "--seed", 0, *evaluate, "--no-progress"]
        return [*args, "--dist-timeout", config.dist_timeout_s]

    done = _torchrun(config, cluster, args_for)
    if "error" in done:
        return done
    lines = [json.loads(line) for line in done["stdout"].splitlines() if line.startswith("{")]
    epoch_s = epoch_seconds(lines, config.epochs)
    if epoch_s is None:
        error = f"not every epoch's JSON line (2 to {config.epochs}) on host 0's stdout"
        return {"error": error, **done}
    record = {"epoch_s": epoch_s, "lines": lines, "seconds": done["seconds"]}
    if config.accuracy:
        record["test_acc"] = lines[-1].get("test_acc")
    return record


def epoch_seconds(lines: list[dict], epochs: int) -> float | None:
    """The steady-state epoch among ``graphengine train``'s JSON lines (its per-epoch lines
    carry ``epoch`` and ``epoch_s``; the final line has no ``epoch``): the mean ``epoch_s``
    of epochs 2 to ``epochs`` (the first compiles the kernels), as train's own final
    ``epoch_s``; ``None`` unless every one of them has its line."""
    seconds = {
        line["epoch"]: float(line["epoch_s"])
        for line in lines
        if "epoch_s" in line and isinstance(line.get("epoch"), int) and line["epoch"] >= 2
    }
    if sorted(seconds) != list(range(2, epochs + 1)):
        return None
    return sum(seconds.values()) / len(seconds)


def _torchrun(config: BenchConfig, cluster: EmulatedCluster, args_for) -> dict:
    """Run ``args_for(host)`` under torchrun on every host: host 0's ``stdout`` and the
    seconds, or ``error`` (the last error line of a host that failed) and each host's exit
    code."""
    # A fresh port a run: the previous run's store socket may linger in TIME_WAIT.
    port = MASTER_PORT + 1 + next(_PORTS) % 1000
    runs = cluster.torchrun(args_for, timeout_s=config.run_timeout_s, master_port=port)
    codes = [r.returncode for r in runs]
    if any(code != 0 for code in codes):
        failed = [r for r in runs if r.returncode != 0]
        # The host whose worker raised says why; the others only that a peer went away.
        origin = min(failed, key=lambda r: r.seconds)
        reason = "timed out" if origin.returncode is None else last_error_line(origin.stderr)
        return {
            "error": f"host {origin.host.rank}: {reason}",
            "returncodes": codes,
            "stderr_tail": origin.stderr[-3000:],
        }
    return {"stdout": runs[0].stdout, "seconds": max(r.seconds for r in runs)}


_ERROR = re.compile(r"(Error|Exception|error:|ERROR|Timed out)")
# torchrun's agent's own line when a worker fails; its report below it only names the worker.
_AGENT_FAILED = re.compile(r"failed \(exitcode: -?\d+\)")


def last_error_line(stderr: str) -> str:
    """Why a command failed, in a line of its ``stderr``: the last line naming an error
    before torchrun's report of the failed worker (the worker's own words), else the
    report's line with the worker's exit code, else the last line with text."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip(" =-\t")]
    agent = next((i for i, line in enumerate(lines) if _AGENT_FAILED.search(line)), None)
    worker = lines if agent is None else lines[:agent]
    errors = [line for line in worker if _ERROR.search(line)]
    if errors:
        return errors[-1]
    return lines[agent] if agent is not None else (lines or ["(no output)"])[-1]


def _single_machine(config: BenchConfig, stores: dict[int, Path], raw: RawResults) -> dict:
    """Each ``(width, hidden)``'s test accuracy trained in one process for the same epochs."""
    accuracies = {}
    for width, hidden in itertools.product(config.widths, config.hiddens):
        command = [sys.executable, "-m", "graphengine", "train", "--dataset", str(stores[width])]
        command += ["--model", config.model, "--hidden", str(hidden)]
        command += ["--fanouts", ",".join(map(str, config.fanouts))]
        command += ["--batch-size", str(config.batch_size), "--epochs", str(config.epochs)]
        command += ["--eval-every", str(config.epochs), "--eval", EVALUATION]
        command += ["--seed", "0", "--no-progress"]
        done = subprocess.run(command, capture_output=True, text=True, env=_env(ONE_THREAD))
        record = {"kind": "single", "width": width, "hidden": hidden}
        if done.returncode != 0:
            record["error"] = last_error_line(done.stderr)
            accuracies[(width, hidden)] = None
        else:
            final = json.loads(done.stdout.strip().splitlines()[-1])
            record["final"] = final
            accuracies[(width, hidden)] = final.get("test_acc")
        raw.append(record)
    return accuracies


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment with the package on ``PYTHONPATH`` (for the commands
    run outside the hosts)."""
    package_root = str(Path(__file__).resolve().parents[2])
    path = os.environ.get("PYTHONPATH", "")
    return {
        **os.environ,
        "PYTHONPATH": package_root + (os.pathsep + path if path else ""),
        **(extra or {}),
    }


def print_tables(results: list[dict], summary: dict) -> None:
    """Per candidate run (with ``summary["accuracy"]``, its test accuracy's gap to the
    single machine's), then per configuration, then the summary's JSON line."""
    rows = []
    for result in results:
        key, comparison = result["key"], result["comparison"]
        for name, entry in comparison["candidates"].items():
            marks = "choice" if name == comparison["choice"] else ""
            marks += " fastest" if name == comparison["fastest"] else ""
            measured = entry["measured"]
            shown = measured if measured is not None else "failed"
            row = [key["hosts"], key["link"], key["width"], key["hidden"], name, shown]
            row += [_or_dash(entry["predicted"]), _percent(entry["rel_error"]), marks.strip()]
            if "accuracy_gap_points" in result:
                row.append(_or_dash(result["accuracy_gap_points"][name]))
            rows.append(row)
    headers = ["hosts", "link", "F", "H", "candidate", "measured s", "predicted s", "error"]
    headers += ["marks"] + (["acc gap pts"] if summary.get("accuracy") else [])
    print_report(headers, rows, None)
    sys.stdout.write("\n")
    per_config = []
    for result in results:
        key, c = result["key"], result["comparison"]
        row = [key["hosts"], key["link"], round(key["rate_mbit"]), key["width"], key["hidden"]]
        row += [c["choice"] or "no plan", c["fastest"] or "-", _percent(c["slowdown"])]
        row += [_times(c["gain_vs_data"]), _times(c["gain_vs_hybrid"]), _or_dash(result["plan_s"])]
        per_config.append(row)
    headers = ["hosts", "link", "Mbit/s", "F", "H", "choice", "fastest", "slowdown"]
    print_report([*headers, "vs data", "vs hybrid", "plan s"], per_config, None)
    for flat in summary["results"]:
        for name, error in flat["errors"].items():
            where = ", ".join(f"{k} {flat[k]}" for k in ("hosts", "link", "width", "hidden"))
            sys.stdout.write(f"failed: {where}: {name}: {error}\n")
    sys.stdout.write(json.dumps(summary) + "\n")
    sys.stdout.flush()


def _or_dash(value):
    return "-" if value is None else value


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:+.1f}%"


def _times(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"
