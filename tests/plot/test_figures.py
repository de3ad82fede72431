"""The drawing functions of :mod:`graphengine.plot` on hand-made results: each figure plots
exactly the numbers it is given (lines' data, bars' lengths, labels), each ``plot_*`` writes
it as a PNG matplotlib reads back and returns the path, drawing leaves pyplot's backend as it
was, and without matplotlib the error says how to install it."""

import math
import sys

import pytest

import graphengine.plot
from graphengine.plot import plot_loaders, plot_metrics, plot_scaling, plot_step, read_metrics
from graphengine.plot.figure import PLOT_HINT
from graphengine.plot.metrics import metrics_figure
from graphengine.plot.sampling import loaders_figure, scaling_figure
from graphengine.plot.training import step_figure
from graphengine.train.metrics import json_line
from tests.plot import assert_png

SCALING = {
    "bench": "scaling",
    "fanouts": [15, 10, 5],
    "batch_size": 1024,
    "threads": 2,
    "ns_per_edge": {"2^16": 30.0, "2^18": 40.0, "2^20": 55.0},
    "max_over_min": 55.0 / 30.0,
    "pyg_ns_per_edge": {"2^16": 90.0, "2^18": 100.0, "2^20": 120.0},
    "dgl": "DGL is not importable (no module named dgl)",
}

SAMPLE_HEADERS = ["loader", "seeds", "edges", "seconds", "seeds/s", "edges/s"]
SAMPLE_ROWS = [
    ["graphengine NeighborLoader (default)", 2048, 900_000, 0.05, 40960.0, 18_000_000.0],
    ["graphengine sampler only", 2048, 900_000, 0.03, 68266.0, 30_000_000.0],
    ["PyG NeighborLoader (not run)", "-", "-", "-", "-", "-"],
    ["DGL NeighborSampler", 2048, 1_500_000, 0.2, 10240.0, 7_500_000.0],
]

TRAIN = {
    "bench": "train",
    "dataset": "synthetic-products",
    "model": "sage-3x256",
    "batch_size": 1024,
    "batches": 8,
    "threads": 2,
    "device": "cpu",
    "step_s": 0.5,
    # over the 8 timed steps: compute 0.4 s a step, waiting 0.05 s, so the rest is 0.05 s
    "stage_s": {"sample": 0.8, "gather": 0.4, "waiting": 0.4, "compute": 3.2},
    "step_s_by_library": {
        "graphengine": {"median": 0.5, "rounds": [0.5]},
        "graphengine_user": {"median": 0.55},
        "pyg": {"median": 1.25},
        "dgl": {"median": 0.9},
    },
}


def test_each_plot_function_writes_its_figure_and_returns_the_path(tmp_path):
    runs = {"run": [epoch(1, 1.0), epoch(2, 0.5)]}
    headers, rows, columns = SAMPLE_HEADERS, SAMPLE_ROWS, ["seeds/s"]
    written = [
        (plot_scaling(SCALING, tmp_path / "scaling.png"), "scaling.png"),
        (plot_loaders(headers, rows, columns, "title", tmp_path / "sample.png"), "sample.png"),
        (plot_step(TRAIN, tmp_path / "step.png"), "step.png"),
        (plot_metrics(runs, str(tmp_path / "curve.png")), "curve.png"),
    ]
    for path, name in written:
        assert path == tmp_path / name
        assert_png(path)


def test_the_package_exports_the_drawing_functions_alone():
    assert graphengine.plot.__all__ == [
        "plot_loaders",
        "plot_memory_limits",
        "plot_metrics",
        "plot_parallel_widths",
        "plot_plan_bench",
        "plot_scaling",
        "plot_step",
        "read_metrics",
    ]


def test_drawing_leaves_the_backend_and_pyplot_s_figures_alone(tmp_path, monkeypatch):
    import matplotlib
    import matplotlib.pyplot as plt

    def use(backend, *args, **kwargs):
        raise AssertionError(f"drawing switched the backend to {backend}")

    monkeypatch.setattr(matplotlib, "use", use)  # a notebook's inline backend stays
    figures = plt.get_fignums()
    plot_scaling(SCALING, tmp_path / "scaling.png")
    plot_metrics({"run": [epoch(1, 1.0, val_acc=0.5)]}, tmp_path / "curve.png")
    assert plt.get_fignums() == figures  # nothing left open in pyplot


def test_the_scaling_figure_has_a_line_per_library_that_ran_through_its_costs():
    (axes,) = scaling_figure(SCALING).axes
    lines = {line.get_label(): line for line in axes.get_lines()}
    assert set(lines) == {"graphengine NeighborSampler", "PyG NeighborLoader (graph only)"}
    ours, pyg = lines["graphengine NeighborSampler"], lines["PyG NeighborLoader (graph only)"]
    assert list(ours.get_xdata()) == [2**16, 2**18, 2**20]
    assert list(ours.get_ydata()) == [30.0, 40.0, 55.0]
    assert list(pyg.get_ydata()) == [90.0, 100.0, 120.0]
    assert axes.get_xscale() == "log"
    assert axes.get_yscale() == "linear"  # 30 to 120: within LOG_SPAN
    assert axes.get_ylim()[0] == 0
    assert [t.get_text() for t in axes.get_xticklabels()] == [
        "$2^{16}$",
        "$2^{18}$",
        "$2^{20}$",
    ]
    assert "ns per sampled edge" in axes.get_ylabel()
    assert "2 threads" in axes.get_title() and "15,10,5" in axes.get_title()
    assert [t.get_text() for t in axes.texts] == ["30", "40", "55", "90", "100", "120"]


def test_costs_spanning_orders_of_magnitude_are_drawn_on_a_log_scale(tmp_path):
    summary = {**SCALING, "pyg_ns_per_edge": {"2^16": 900.0, "2^18": 1000.0, "2^20": 1200.0}}
    (axes,) = scaling_figure(summary).axes
    assert axes.get_yscale() == "log"
    plot_scaling(summary, tmp_path / "scaling.svg")
    assert (tmp_path / "scaling.svg").read_text().lstrip().startswith("<?xml")


def test_the_loader_figure_has_a_bar_per_row_that_ran_and_a_panel_per_column():
    figure = loaders_figure(SAMPLE_HEADERS, SAMPLE_ROWS, ["seeds/s", "edges/s"], "title")
    seeds, edges = figure.axes
    assert [p.get_width() for p in seeds.patches] == [40960.0, 68266.0, 10240.0]
    assert [p.get_width() for p in edges.patches] == [18e6, 30e6, 7.5e6]
    # the bars sit at the rows' positions: the peer that did not run keeps its row, empty
    assert [p.get_y() + p.get_height() / 2 for p in seeds.patches] == [0, 1, 3]
    names = [t.get_text() for t in seeds.get_yticklabels()]
    assert names == [row[0] for row in SAMPLE_ROWS]
    assert [t.get_text() for t in seeds.texts] == ["41 k", "68.3 k", "10.2 k"]
    assert seeds.get_xlabel().startswith("seeds/s") and edges.get_xlabel().startswith("edges/s")
    assert figure.get_suptitle() == "title"
    # DGL's bar in DGL's color, graphengine's in its own
    assert seeds.patches[2].get_facecolor() != seeds.patches[0].get_facecolor()


def test_the_step_figure_stacks_graphengine_s_step_and_shows_the_peers_whole():
    figure = step_figure(TRAIN)
    steps, stages = figure.axes
    stacked = [p for p in steps.patches if p.get_y() + p.get_height() / 2 == 0]
    assert [p.get_width() for p in stacked] == pytest.approx([0.4, 0.05, 0.05])
    assert [p.get_x() for p in stacked] == pytest.approx([0.0, 0.4, 0.45])
    assert sum(p.get_width() for p in stacked) == pytest.approx(TRAIN["step_s"])
    whole = [p for p in steps.patches if p not in stacked]
    assert [p.get_width() for p in whole] == [0.55, 1.25, 0.9]
    assert [t.get_text() for t in steps.get_yticklabels()] == [
        "graphengine (as its CLI runs)",
        "graphengine (library user)",
        "PyG NeighborLoader loop",
        "DGL DataLoader loop",
    ]
    assert [p.get_width() for p in stages.patches] == pytest.approx([0.1, 0.05, 0.4])
    assert [t.get_text() for t in stages.get_yticklabels()] == ["sample", "gather", "compute"]
    (step_line,) = stages.get_lines()
    assert list(step_line.get_xdata()) == [0.5, 0.5]
    assert "2 threads" in figure.get_suptitle()


def test_with_several_rounds_the_stacked_step_is_the_median_in_the_mean_s_shares():
    # Rounds of 0.5, 0.5 and 1.1 s a step: the median 0.5 s, the mean 0.7 s, of which the
    # mean compute (0.4 s) and wait (0.05 s) leave 0.25 s. Stacked as they are, they would
    # pass the median; in their shares of the mean step, they sum to it.
    library = {
        **TRAIN["step_s_by_library"],
        "graphengine": {"median": 0.5, "rounds": [0.5, 0.5, 1.1]},
    }
    figure = step_figure({**TRAIN, "threads": 1, "rounds": 3, "step_s_by_library": library})
    steps, stages = figure.axes
    stacked = [p for p in steps.patches if p.get_y() + p.get_height() / 2 == 0]
    shares = [0.4 / 0.7, 0.05 / 0.7, 0.25 / 0.7]
    assert [p.get_width() for p in stacked] == pytest.approx([s * 0.5 for s in shares])
    assert sum(p.get_width() for p in stacked) == pytest.approx(0.5)
    assert "median of 3 rounds" in steps.get_xlabel()
    assert "mean of 3 rounds" in stages.get_xlabel()
    assert "1 thread," in figure.get_suptitle()


def epoch(number, loss, **metrics):
    """An epoch record as :meth:`Trainer.fit` writes it (fewer keys)."""
    return {"epoch": number, "loss": loss, "epoch_s": 1.0, "stage_s": {"sample": 0.1}, **metrics}


def write_lines(path, records):
    path.write_text("".join(json_line(r) + "\n" for r in records))
    return path


def test_metrics_are_read_back_as_written_with_a_non_finite_loss_as_nan(tmp_path):
    records = [epoch(1, 2.0, train_acc=0.2), epoch(2, math.nan, train_acc=0.5)]
    path = write_lines(tmp_path / "m.jsonl", [*records, {"dataset": "x", "epochs": 2}])
    read = read_metrics(path)
    assert [r["epoch"] for r in read] == [1, 2]
    assert read[0] == records[0]
    assert math.isnan(read[1]["loss"])  # json_line wrote it as null


def test_the_metrics_figure_draws_loss_and_each_split_per_epoch():
    run = [
        epoch(1, 2.0, train_acc=0.2, val_acc=0.3),
        epoch(2, 1.5, train_acc=0.5, val_acc=0.6),
        epoch(3, 1.0, train_acc=0.7),  # not evaluated this epoch: no val point
    ]
    loss, accuracy = metrics_figure({"run": run}).axes
    (loss_line,) = loss.get_lines()
    assert list(loss_line.get_xdata()) == [1, 2, 3]
    assert list(loss_line.get_ydata()) == [2.0, 1.5, 1.0]
    lines = {line.get_label(): line for line in accuracy.get_lines()}
    assert set(lines) == {"train acc (running)", "val acc"}
    assert list(lines["train acc (running)"].get_ydata()) == [0.2, 0.5, 0.7]
    assert list(lines["val acc"].get_xdata()) == [1, 2]
    assert list(lines["val acc"].get_ydata()) == [0.3, 0.6]
    assert accuracy.get_ylabel() == "accuracy" and loss.get_xlabel() == "epoch"
    # one run: its metrics apart by color as well as by line style
    assert lines["val acc"].get_color() != lines["train acc (running)"].get_color()
    assert lines["val acc"].get_linestyle() != lines["train acc (running)"].get_linestyle()


def test_runs_overlay_one_color_each_and_link_metrics_are_drawn_as_metrics():
    runs = {
        "a": [epoch(1, 0.7, val_auc=0.8), epoch(2, 0.6, val_auc=0.85, val_mrr=0.4)],
        "b": [epoch(1, 0.9, val_auc=0.7)],
    }
    loss, metrics = metrics_figure(runs).axes
    assert [line.get_label() for line in loss.get_lines()] == ["a", "b"]
    assert [line.get_label() for line in metrics.get_lines()] == [
        "a: val auc",
        "a: val mrr",
        "b: val auc",
    ]
    colors = [line.get_color() for line in metrics.get_lines()]
    assert colors[0] == colors[1] != colors[2]
    auc, mrr, _ = metrics.get_lines()
    assert auc.get_marker() != mrr.get_marker()  # same run, same split: the metric tells
    assert metrics.get_ylabel() == "metric"


def test_a_run_without_quality_metrics_gets_the_loss_panel_alone():
    assert len(metrics_figure({"run": [epoch(1, 1.0), epoch(2, 0.5)]}).axes) == 1


def test_without_matplotlib_drawing_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib fails
    with pytest.raises(ImportError, match="plotting needs matplotlib") as error:
        plot_scaling(SCALING, tmp_path / "scaling.png")
    assert PLOT_HINT in str(error.value)
    assert not (tmp_path / "scaling.png").exists()


def test_a_step_figure_without_peers_has_graphengine_s_bar_alone():
    library = {"graphengine": TRAIN["step_s_by_library"]["graphengine"]}
    steps, _ = step_figure({**TRAIN, "step_s_by_library": library}).axes
    assert [p.get_width() for p in steps.patches] == pytest.approx([0.4, 0.05, 0.05])
    legend = [t.get_text() for t in steps.get_legend().get_texts()]
    assert "whole step (not split)" not in legend
    assert steps.get_xlim()[1] > 0.5  # room for the step's label past its bar


def test_a_limit_whose_reads_were_not_measured_has_no_read_bar_and_says_so():
    from graphengine.plot.memory import memory_limits_figure

    stages = {"sample": 0.1, "gather": 0.2, "compute": 0.3}
    row = {"limit_bytes": None, "step_s": 1.0, "stage_s": stages, "error": None}
    rows = [
        {**row, "limit": "none", "read_mb": 500.0, "major_faults": 10.0},
        {**row, "limit": "none", "read_mb": None, "major_faults": 3.0},
    ]
    figure = memory_limits_figure({"dataset": "d", "store_bytes": 10**9, "rows": rows})
    _, reads = figure.axes
    assert [bar.get_height() for bar in reads.patches] == [500.0, 0.0]
    assert [text.get_text() for text in reads.texts] == ["10 major faults", "not measured"]
