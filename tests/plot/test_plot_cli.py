"""``graphengine plot`` and the benches' ``--plot``: the figure of a metrics file as ``train``
writes it, bad input as one error line naming the file and line (exit code 2), a figure path
or a missing matplotlib refused before a bench runs, and tiny ``bench scaling --plot`` and
``bench sample --plot`` runs whose figures draw the numbers they print."""

import json
import sys
from pathlib import Path

import pytest

from graphengine.cli import build_parser, main
from graphengine.plot import sampling
from graphengine.train.metrics import json_line
from tests.plot import PNG_SIGNATURE, assert_png


def metrics_file(path, losses, accuracies):
    """A ``--metrics`` file of one epoch record per loss (``train_acc``, ``val_acc`` each the
    accuracy given), then the final summary line ``train`` prints on stdout."""
    lines = [
        json_line(
            {
                "epoch": e,
                "loss": loss,
                "train_acc": acc,
                "epoch_s": 0.5,
                "seeds_per_s": 1000.0,
                "stage_s": {"sample": 0.1, "gather": 0.1, "waiting": 0.0, "compute": 0.3},
                "val_acc": acc + 0.1,
            }
        )
        for e, (loss, acc) in enumerate(zip(losses, accuracies, strict=True), start=1)
    ]
    lines.append(json_line({"dataset": "synthetic-small", "epochs": len(losses)}))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_plot_draws_each_file_as_a_run_and_reports_the_figure(tmp_path, capsys):
    first = metrics_file(tmp_path / "lr-0.01.jsonl", [2.0, 1.0, 0.5], [0.2, 0.5, 0.7])
    second = metrics_file(tmp_path / "lr-0.1.jsonl", [1.5, float("nan")], [0.3, 0.4])
    out = tmp_path / "curves.png"
    assert main(["plot", str(first), str(second), "--out", str(out)]) == 0
    assert_png(out)
    line = json.loads(capsys.readouterr().out)
    assert line == {"figure": str(out), "runs": {"lr-0.01": 3, "lr-0.1": 2}}


def test_the_figure_goes_beside_the_first_file_by_default(tmp_path, capsys):
    path = metrics_file(tmp_path / "run.jsonl", [1.0, 0.5], [0.5, 0.6])
    assert main(["plot", str(path)]) == 0
    assert (tmp_path / "run.png").read_bytes()[:8] == PNG_SIGNATURE


def bad_inputs(tmp_path):
    """(file, what the error line says) for input the command refuses."""
    good = json_line({"epoch": 1, "loss": 1.0})
    cases = {
        "not-json.jsonl": (f"{good}\n{{'epoch': 2\n", "line 2: not JSON"),
        "array.jsonl": (f"{good}\n[1, 2]\n", "line 2: not a JSON object"),
        "summary-only.jsonl": ('{"dataset": "x", "epochs": 3}\n', "holds no epoch records"),
        "empty.jsonl": ("", "holds no epoch records"),
        "no-loss.jsonl": ('{"epoch": 1, "train_acc": 0.5}\n', "line 1: an epoch record without"),
        "text-epoch.jsonl": ('{"epoch": "one", "loss": 1.0}\n', "line 1: 'epoch' is not an"),
        "two-runs.jsonl": (
            "".join(json_line({"epoch": e, "loss": 1.0}) + "\n" for e in [1, 2, 3, 1, 2, 3]),
            "line 4: epoch 1 after epoch 3: two runs in one file? give each its own file",
        ),
        "latin-1.jsonl": (
            f"{good}\n".encode() + '{"epoch": 2, "loss": 1.0, "note": "é"}\n'.encode("latin-1"),
            "line 2: not UTF-8 text",
        ),
    }
    for name, (text, _) in cases.items():
        if isinstance(text, bytes):
            (tmp_path / name).write_bytes(text)
        else:
            (tmp_path / name).write_text(text)
    return [(tmp_path / name, message) for name, (_, message) in cases.items()]


def test_bad_metrics_files_are_one_error_line_naming_the_file_with_exit_2(tmp_path, caplog):
    cases = [*bad_inputs(tmp_path), (tmp_path / "missing.jsonl", "not found")]
    for path, message in cases:
        caplog.clear()
        out = tmp_path / "out.png"
        assert main(["plot", str(path), "--out", str(out)]) == 2, path
        (error,) = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
        assert str(path) in error and message in error, error
        assert "\n" not in error and "Traceback" not in caplog.text
        assert not out.exists()


def test_a_file_given_twice_is_refused_naming_it(tmp_path, caplog, monkeypatch):
    path = metrics_file(tmp_path / "run.jsonl", [1.0, 0.5], [0.5, 0.6])
    monkeypatch.chdir(tmp_path)
    for again in (str(path), "run.jsonl"):  # as written, or by another path to the file
        caplog.clear()
        assert main(["plot", str(path), again, "--out", str(tmp_path / "out.png")]) == 2
        (error,) = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
        assert f"'{again}' given twice" in error and "each file is one run" in error
        assert not (tmp_path / "out.png").exists()


def test_an_output_that_cannot_be_written_is_refused_before_reading(tmp_path, caplog):
    path = metrics_file(tmp_path / "run.jsonl", [1.0], [0.5])
    (tmp_path / "folder").mkdir()
    cases = [
        (tmp_path / "missing" / "out.png", "does not exist"),
        (tmp_path / "folder", "is a directory"),
        (tmp_path / "out.unknown", "the suffix gives the figure's format"),
    ]
    for out, message in cases:
        caplog.clear()
        assert main(["plot", str(path), "--out", str(out)]) == 2
        assert f"--out '{out}'" in caplog.text and message in caplog.text


def test_without_matplotlib_plot_fails_with_the_install_hint_and_exit_2(
    tmp_path, caplog, monkeypatch
):
    path = metrics_file(tmp_path / "run.jsonl", [1.0], [0.5])
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib fails
    assert main(["plot", str(path)]) == 2
    assert "plotting needs matplotlib: pip install 'graphengine[plot]'" in caplog.text
    assert not (tmp_path / "run.png").exists()


BENCHES = [
    ["bench", "scaling", "--log2-nodes", "30"],  # hours of work, were the path not refused first
    ["bench", "sample", "--dataset", "no-such-dataset"],
    ["bench", "train", "--dataset", "no-such-dataset"],
]


@pytest.mark.parametrize("bench", BENCHES, ids=lambda argv: argv[1])
def test_a_bench_s_plot_path_is_checked_before_the_bench_runs(tmp_path, caplog, bench):
    out = tmp_path / "missing" / "figure.png"
    assert main([*bench, "--plot", str(out)]) == 2
    (error,) = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert error.startswith(f"--plot '{out}'") and "does not exist" in error


def test_without_matplotlib_a_bench_with_plot_fails_before_it_runs(tmp_path, caplog, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    argv = ["bench", "sample", "--dataset", "no-such-dataset", "--plot", str(tmp_path / "f.png")]
    assert main(argv) == 2
    assert "plotting needs matplotlib" in caplog.text and "no-such-dataset" not in caplog.text


@pytest.fixture
def drawn(monkeypatch):
    """The figures :mod:`graphengine.plot.sampling` draws, kept for inspection (then saved as
    usual)."""
    figures = []
    for name in ("scaling_figure", "loaders_figure"):
        draw = getattr(sampling, name)
        monkeypatch.setattr(
            sampling, name, lambda *args, draw=draw: figures.append(draw(*args)) or figures[-1]
        )
    return figures


def test_bench_scaling_plot_draws_the_costs_it_prints(tmp_path, capsys, drawn):
    out = tmp_path / "scaling.png"
    argv = ["bench", "scaling", "--log2-nodes", "8,10", "--batches", "2", "--batch-size", "32"]
    assert main([*argv, "--plot", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert_png(out)
    assert set(summary["ns_per_edge"]) == {"2^8", "2^10"}
    (figure,) = drawn
    (axes,) = figure.axes
    (line,) = [line for line in axes.get_lines() if line.get_label().startswith("graphengine")]
    assert list(line.get_xdata()) == [2**8, 2**10]
    assert list(line.get_ydata()) == [summary["ns_per_edge"]["2^8"], summary["ns_per_edge"]["2^10"]]


def test_bench_sample_plot_draws_a_bar_per_loader_row(tmp_path, capsys, drawn):
    out = tmp_path / "sample.png"
    argv = ["bench", "sample", "--dataset", "synthetic-small", "--root", str(tmp_path / "root")]
    argv += ["--fanouts", "4,4", "--batches", "2", "--batch-size", "64"]
    assert main([*argv, "--plot", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert_png(out)
    assert summary["bench"] == "sample" and summary["edges_per_s"] > 0
    (figure,) = drawn
    seeds, edges = figure.axes
    rows = [t.get_text() for t in seeds.get_yticklabels()]
    assert len(seeds.patches) == len(edges.patches) == len(rows)  # every loader ran
    # Each bar's number is the printed one, row by row.
    drawn_seeds = dict(zip(rows, [p.get_width() for p in seeds.patches], strict=True))
    drawn_edges = dict(zip(rows, [p.get_width() for p in edges.patches], strict=True))
    printed = {
        "graphengine NeighborLoader (default)": ("seeds_per_s", "edges_per_s"),
        "graphengine NeighborLoader (num_workers=2)": (None, "two_workers_edges_per_s"),
        "graphengine NeighborLoader (num_workers=0)": ("inline_seeds_per_s", "inline_edges_per_s"),
        "graphengine sampler only": (None, "sampler_only_edges_per_s"),
    }
    assert set(drawn_edges) == set(printed)
    for row, (seeds_key, edges_key) in printed.items():
        assert drawn_edges[row] == pytest.approx(summary[edges_key], rel=1e-9), row
        if seeds_key is not None:
            assert drawn_seeds[row] == pytest.approx(summary[seeds_key], rel=1e-9), row


@pytest.mark.parametrize("bench", ["scaling", "sample", "train"])
def test_the_benches_with_figures_take_plot_and_peers_alike(bench):
    parse = build_parser().parse_args
    assert parse(["bench", bench]).plot is None and parse(["bench", bench]).vs == []
    args = parse(["bench", bench, "--vs", "dgl", "pyg", "--plot", "figure.png"])
    assert args.plot == Path("figure.png") and args.vs == ["dgl", "pyg"]
