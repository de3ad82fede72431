"""``graphengine bench train --parallel hybrid`` end to end on a small dataset: both modes'
workers run under torchrun and report, and ``--plot`` draws the measured seconds a step the
JSON line reports."""

import json

import pytest

from graphengine.cli import main

pytest.importorskip("matplotlib")


def test_hybrid_against_data_runs_both_modes_and_plots_what_it_measured(
    tmp_path, capsys, monkeypatch
):
    from graphengine.plot import parallel

    figures = []
    save = parallel.save_figure
    monkeypatch.setattr(parallel, "save_figure", lambda f, p: figures.append(f) or save(f, p))
    plot = tmp_path / "hybrid.png"
    argv = ["bench", "train", "--parallel", "hybrid", "--nproc", "2", "--dataset"]
    argv += ["synthetic-small", "--root", str(tmp_path / "data"), "--widths", "16"]
    argv += ["--hiddens", "16", "--steps", "2", "--batch-size", "256", "--plot", str(plot)]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    rows = {row["parallel"]: row for row in summary["measured"]}
    # Hybrid holds half the columns (16 features over 2 workers); data maps the whole table.
    assert rows["hybrid"]["feature_held_mb"] == pytest.approx(rows["data"]["feature_held_mb"] / 2)
    assert plot.read_bytes()[:4] == b"\x89PNG"
    lines = {line.get_label(): line.get_ydata() for line in figures[0].axes[0].get_lines()}
    assert list(lines["data, hidden 16"]) == [rows["data"]["s_per_step"]]
    assert list(lines["hybrid, hidden 16"]) == [rows["hybrid"]["s_per_step"]]
