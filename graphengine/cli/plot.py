"""``graphengine plot``: a training run's loss and accuracy per epoch, from the JSON lines
``graphengine train`` writes."""

from __future__ import annotations

from pathlib import Path

from . import options
from .output import figure_written, print_json
from .paths import check_figure_file

DESCRIPTION = (
    "Draw training runs' loss and accuracy (or link prediction's AUC, MRR, Hits@K) per epoch "
    "from the JSON lines 'graphengine train --metrics FILE' writes (or its stdout, saved). "
    "Several files overlay their runs, each labeled with its file's name."
)
EPILOG = """\
output: the figure (PNG, or SVG or PDF by --out's suffix), then one JSON line: figure (its
path) and runs (each run's label and epochs drawn). Exit code 2: a file missing, a line
that is not JSON or not UTF-8 (the file and line named), two runs appended to one file, a
file without epoch records, a file given twice, an --out that cannot be written, or
matplotlib missing (pip install 'graphengine[plot]')."""


def add_parser(commands) -> None:
    plot = options.add_command(
        commands,
        "plot",
        "draw training runs' loss and accuracy per epoch (needs matplotlib)",
        description=DESCRIPTION,
        epilog=EPILOG,
    )
    plot.add_argument(
        "metrics",
        nargs="+",
        type=Path,
        metavar="METRICS.jsonl",
        help="JSON lines of graphengine train (--metrics FILE, or its stdout)",
    )
    plot.add_argument(
        "--out",
        type=Path,
        metavar="FILE.png",
        help="the figure's file (default: the first METRICS file with the suffix .png)",
    )
    plot.set_defaults(run=run)


def run(args) -> int:
    from graphengine.plot import plot_metrics, read_metrics

    _refuse_repeats(args.metrics)
    out = args.out if args.out is not None else args.metrics[0].with_suffix(".png")
    check_figure_file("--out", out)
    runs = {label: read_metrics(path) for label, path in _labels(args.metrics).items()}
    figure_written(plot_metrics(runs, out))
    print_json({"figure": str(out), "runs": {k: len(v) for k, v in runs.items()}})
    return 0


def _refuse_repeats(paths: list[Path]) -> None:
    """A ``ValueError`` naming a file given twice (as written or by another path to it):
    each file is one run, and two labels for one run would draw it over itself."""
    seen = {}
    for path in paths:
        key = path.resolve()
        if key in seen:
            raise ValueError(
                f"'{path}' given twice (as '{seen[key]}' too): each file is one run"
                if str(seen[key]) != str(path)
                else f"'{path}' given twice: each file is one run"
            )
        seen[key] = path


def _labels(paths: list[Path]) -> dict[str, Path]:
    """Each file's run label: its name without the suffix, or its whole path where two
    files share a name."""
    stems = [p.stem for p in paths]
    return {(p.stem if stems.count(p.stem) == 1 else str(p)): p for p in paths}
