"""The figure of ``graphengine plot``: a training run's loss and accuracy per epoch, read
from the JSON lines ``graphengine train`` writes (``--metrics FILE``, or its stdout)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from graphengine.plot.figure import new_figure, save_figure

# The per-epoch quality metrics drawn in the second panel: accuracies (node classification)
# and the ranking metrics of link prediction, per split.
QUALITY = re.compile(r"(train|val|test)_(acc|auc|mrr|hits@\d+)")
# A line style per split and a marker per metric, so that runs (one color each), splits and
# metrics read apart; a single run colors each of its metrics apart too.
SPLIT_STYLES = {"train": "-", "val": "--", "test": ":"}
MARKERS = "osD^v<>"


def read_metrics(path: str | Path) -> list[dict]:
    """The epoch records of a file of JSON lines, in the file's order.

    Args:
        path: a file ``graphengine train --metrics`` appended to (one JSON object a line),
            or its stdout saved: lines without an ``epoch`` (the final summary) are skipped,
            and so are blank lines.

    Returns:
        A list of one dict per epoch record, each with ``epoch`` (int), ``loss`` (float, NaN
        where the line has ``null``) and the record's other keys as written (``train_acc``,
        ``val_acc`` ...).

    Raises:
        FileNotFoundError: ``path`` is not a file.
        ValueError: a line that is not UTF-8 text or not a JSON object, an epoch record
            whose ``epoch`` is not an int or not past the previous record's (two runs
            appended to one file), or whose ``loss`` is not a number, or no epoch record at
            all; the message names the file and the line.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"metrics file '{path}' not found (or not a file)")
    records = []
    with path.open("rb") as f:
        for number, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise ValueError(f"'{path}', line {number}: not UTF-8 text") from None
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(f"'{path}', line {number}: not JSON ({error.msg})") from None
            if not isinstance(record, dict):
                raise ValueError(f"'{path}', line {number}: not a JSON object")
            if "epoch" in record:
                record = _epoch_record(record, path, number)
                if records and record["epoch"] <= records[-1]["epoch"]:
                    raise ValueError(
                        f"'{path}', line {number}: epoch {record['epoch']} after epoch "
                        f"{records[-1]['epoch']}: two runs in one file? give each its own file"
                    )
                records.append(record)
    if not records:
        raise ValueError(
            f"'{path}' holds no epoch records (JSON lines with 'epoch' and 'loss', as "
            "graphengine train --metrics writes)"
        )
    return records


def plot_metrics(runs: dict[str, list[dict]], path: str | Path) -> Path:
    """Draw training runs' loss and quality metrics per epoch to ``path``
    (:func:`metrics_figure`'s figure).

    Args:
        runs: a run's label -> its epoch records (see :func:`metrics_figure`).
        path: the figure's file; its suffix gives the format.

    Returns:
        the path written.
    """
    return save_figure(metrics_figure(runs), path)


def metrics_figure(runs: dict[str, list[dict]]):
    """The figure of training runs' loss (left) and quality metrics (right) per epoch (a
    matplotlib ``Figure``, not saved).

    Args:
        runs: a run's label (the legend's) -> its epoch records (:func:`read_metrics`'s:
            ``epoch``, ``loss`` and the metrics matching :data:`QUALITY`, such as
            ``train_acc``, ``val_acc``, ``val_auc``; a record lacking one has no point
            there). One color per run (per metric when there is one run), one line style
            per split, one marker per metric (``acc``, ``auc``, ``mrr``, ``hits@K``).

    The right panel, "accuracy" when every metric is one, is left out when no record has a
    quality metric. A node run's ``train_acc`` is the running accuracy over the epoch's
    batches (the weights changing while it is counted).
    """
    found = {k for records in runs.values() for r in records for k in r if QUALITY.fullmatch(k)}
    keys = sorted(found, key=lambda k: (list(SPLIT_STYLES).index(k.split("_")[0]), k))
    figure, panels = new_figure(2 if keys else 1, width=5.2, height=3.8)
    from matplotlib.ticker import MaxNLocator  # after new_figure: its error if it is missing

    metrics = sorted({k.split("_", 1)[1] for k in keys})
    for color, (run, records) in enumerate(runs.items()):
        prefix = f"{run}: " if len(runs) > 1 else ""
        epochs = [r["epoch"] for r in records]
        panels[0].plot(epochs, [r["loss"] for r in records], "o-", color=f"C{color}", label=run)
        for key in keys:
            split, metric = key.split("_", 1)
            points = [(r["epoch"], r[key]) for r in records if _number(r.get(key))]
            if points:
                panels[1].plot(
                    *zip(*points, strict=True),
                    marker=MARKERS[metrics.index(metric) % len(MARKERS)],
                    linestyle=SPLIT_STYLES[split],
                    color=f"C{color if len(runs) > 1 else keys.index(key)}",
                    label=prefix + _metric_label(key),
                )
    quality = "accuracy" if all(k.endswith("_acc") for k in keys) else "metric"
    for axes, name in zip(panels, ["training loss", quality], strict=False):
        axes.set_xlabel("epoch")
        axes.set_ylabel(name)
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        axes.grid(True, alpha=0.3)
        axes.set_title(f"{name} per epoch", fontsize="medium")
    if len(runs) > 1:
        panels[0].legend(fontsize="small")
    if keys:
        panels[1].legend(fontsize="small")
    return figure


def _epoch_record(record: dict, path: Path, number: int) -> dict:
    """``record`` with its ``epoch`` and ``loss`` checked, ``loss`` ``null`` as NaN."""
    epoch, loss = record["epoch"], record.get("loss")
    if not isinstance(epoch, int) or isinstance(epoch, bool):
        raise ValueError(f"'{path}', line {number}: 'epoch' is not an integer ({epoch!r})")
    if "loss" not in record:
        raise ValueError(f"'{path}', line {number}: an epoch record without 'loss'")
    if loss is not None and not _number(loss):
        raise ValueError(f"'{path}', line {number}: 'loss' is not a number ({loss!r})")
    return {**record, "loss": math.nan if loss is None else float(loss)}


def _metric_label(key: str) -> str:
    """A metric's legend label: ``val_acc`` as ``val acc``; ``train_acc`` says that it is
    counted while the epoch trains."""
    label = key.replace("_", " ")
    return f"{label} (running)" if key == "train_acc" else label


def _number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
