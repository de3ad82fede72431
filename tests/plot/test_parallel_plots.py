"""The parallel benchmarks' figures draw the numbers they are given: the lines' points are
the input rows', the axes are the ones the rows call for, and the file is a PNG."""

import math

import pytest

pytest.importorskip("matplotlib")

from graphengine.cli import main
from graphengine.cli.paths import check_figure_file
from graphengine.plot import parallel
from tests.plot import PNG_SIGNATURE


@pytest.fixture
def drawn(monkeypatch):
    """The figures the module saves, kept open for inspection (then saved as usual)."""
    figures = []
    save = parallel.save_figure

    def keep(figure, path):
        figures.append(figure)
        figure.canvas.draw()  # lays out the axes as they are saved
        return save(figure, path)

    monkeypatch.setattr(parallel, "save_figure", keep)
    return figures


def _lines(axes) -> dict:
    """Each line's label to its points."""
    return {
        line.get_label(): (list(line.get_xdata()), list(line.get_ydata()))
        for line in axes.get_lines()
    }


def _widths_summary(widths):
    measured, projected = [], []
    for i, width in enumerate(widths):
        for hidden in (64, 256):
            for mode, share in (("data", 1.0), ("hybrid", 0.5)):
                step = share * (i + 1) + hidden / 1000
                measured.append(
                    {"width": width, "hidden": hidden, "parallel": mode, "s_per_step": step}
                )
            for workers in (2, 8, 16):
                projected.append(
                    {
                        "width": width,
                        "hidden": hidden,
                        "workers": workers,
                        "data_s": width * workers / 1e4,
                        "hybrid_s": hidden / 1e4,
                    }
                )
    return {"workers": 2, "link_gbps": 10.0, "measured": measured, "projected": projected}


def test_hybrid_against_data_draws_each_mode_and_hidden_width_by_feature_width(tmp_path, drawn):
    path = parallel.plot_parallel_widths(_widths_summary([1024, 100, 512]), tmp_path / "p.png")
    assert path.read_bytes()[:8] == PNG_SIGNATURE
    measured, projected = drawn[0].axes
    lines = _lines(measured)
    # Sorted by width: 100, 512, 1024 were the second, third and first widths given.
    assert lines["data, hidden 64"] == ([100, 512, 1024], pytest.approx([2.064, 3.064, 1.064]))
    assert lines["hybrid, hidden 256"] == ([100, 512, 1024], pytest.approx([1.256, 1.756, 0.756]))
    # The projection at the most workers, 16: data's bytes grow with F, hybrid's with H.
    lines = _lines(projected)
    assert lines["data, hidden 256"][1] == pytest.approx([0.16, 0.8192, 1.6384])
    assert lines["hybrid, hidden 64"][1] == pytest.approx([0.0064] * 3)
    assert "16 workers" in projected.get_title() and "10 Gb/s" in projected.get_title()
    # 100 to 1024 spans 10x or more: a log axis, ticked at the widths.
    assert measured.get_xscale() == "log"
    assert list(measured.get_xticks()) == [100, 512, 1024]


def test_widths_within_a_factor_of_ten_are_drawn_on_a_linear_axis(tmp_path, drawn):
    parallel.plot_parallel_widths(_widths_summary([128, 256]), tmp_path / "p.png")
    assert drawn[0].axes[0].get_xscale() == "linear"


def _result(hosts, link, rate, measured, predicted, choice, width=100, hidden=64):
    return {
        "hosts": hosts,
        "link": link,
        "rate_mbit": rate,
        "width": width,
        "hidden": hidden,
        "choice": choice,
        "candidates": {
            name: {"measured": measured[name], "predicted": predicted.get(name)}
            for name in measured
        },
    }


def test_the_plan_bench_draws_measured_and_predicted_epochs_by_hosts_per_link(tmp_path, drawn):
    results = [
        # The slow link first: its panel still comes second, after the faster link's.
        _result(2, "slow", 100.0, {"data": 3.0, "hybrid": 2.0}, {"data": 3.3}, "hybrid"),
        _result(3, "slow", 100.0, {"data": 4.0, "hybrid": None}, {"data": 4.4}, "data"),
        _result(2, "fast", 1000.0, {"data": 1.0, "hybrid": 1.5}, {"data": 0.9}, "data"),
        _result(3, "fast", 1000.0, {"data": 1.2, "hybrid": 1.4}, {"data": 1.1}, None),
    ]
    path = parallel.plot_plan_bench(results, tmp_path / "plan.png")
    assert path.read_bytes()[:8] == PNG_SIGNATURE
    fast, slow = drawn[0].axes
    assert fast.get_title() == "fast link (1,000 Mbit/s), F=100, H=64"
    assert slow.get_title().startswith("slow link (100 Mbit/s)")
    lines = _lines(slow)
    assert lines["data measured"] == ([2, 3], [3.0, 4.0])
    assert lines["data predicted"] == ([2, 3], [3.3, 4.4])
    hybrid = lines["hybrid measured"][1]
    assert hybrid[0] == 2.0 and math.isnan(hybrid[1])  # the failed run: a gap
    assert all(math.isnan(s) for s in lines["hybrid predicted"][1])  # never predicted
    # The choice ringed where it ran: hybrid at 2 hosts, data at 3.
    assert lines["planner's choice"] == ([2, 3], [2.0, 4.0])
    # No plan at 3 hosts on the fast link: only 2 hosts' choice.
    assert _lines(fast)["planner's choice"] == ([2], [1.0])


def test_one_panel_per_link_and_shape_in_a_grid(tmp_path, drawn):
    results = [
        _result(2, link, rate, {"data": 1.0}, {}, "data", width=w, hidden=h)
        for link, rate in (("fast", 10.0), ("slow", 1.0))
        for w, h in ((100, 64), (512, 64), (512, 256))
    ]
    parallel.plot_plan_bench(results, tmp_path / "plan.png")
    titles = [axes.get_title() for axes in drawn[0].axes]
    assert len(titles) == 6
    assert titles[0].endswith("F=100, H=64") and titles[5].endswith("F=512, H=256")
    assert titles[4].startswith("fast") and titles[5].startswith("slow")


def test_no_result_is_refused(tmp_path):
    with pytest.raises(ValueError, match="no configuration"):
        parallel.plot_plan_bench([], tmp_path / "plan.png")


def test_a_plot_path_is_checked_before_a_bench_runs(tmp_path, caplog):
    with pytest.raises(ValueError, match="the suffix gives the figure's format"):
        check_figure_file("--plot", tmp_path / "figure.txt")
    with pytest.raises(ValueError, match="is a directory"):
        check_figure_file("--plot", tmp_path)
    with pytest.raises(ValueError, match="does not exist"):
        check_figure_file("--plot", tmp_path / "missing" / "figure.png")
    check_figure_file("--plot", tmp_path / "figure.svg")
    # A plot of a mode that has none, and a bad path, exit 2 before any dataset is opened.
    assert main(["bench", "train", "--nproc", "2", "--plot", str(tmp_path / "f.png")]) == 2
    assert "not --nproc's data-parallel epochs" in caplog.text
    argv = ["bench", "train", "--parallel", "hybrid", "--nproc", "2", "--root", str(tmp_path)]
    caplog.clear()
    assert main([*argv, "--plot", str(tmp_path / "missing" / "f.png")]) == 2
    assert "does not exist" in caplog.text
    caplog.clear()
    assert main(["bench", "plan", "--plot", str(tmp_path / "f.txt")]) == 2
    assert "the suffix gives the figure's format" in caplog.text
    assert list(tmp_path.iterdir()) == []  # no dataset generated
