"""``graphengine bench plan``'s pure parts against hand-computed values: the comparison of
measured and predicted epochs, the summary over configurations, reading the plan's and
train's JSON, the error line of a failed torchrun, and the options. The runs on the
emulated cluster are the lead's to time, not a test's."""

import json
import math

import pytest

from graphengine.bench.plan import (
    BenchConfig,
    bench_spec,
    epoch_seconds,
    last_error_line,
    print_tables,
    read_plan,
)
from graphengine.bench.plan_stats import CANDIDATES, compare, summarize
from graphengine.cli import build_parser
from graphengine.datasets.catalog import SYNTHETIC

# measured 10, 8, 5, 4; predicted 11, 6, 5.5, 5; the planner picks partitioned.
MEASURED = {"data": 10.0, "hybrid": 8.0, "partitioned": 5.0, "hybrid-partitioned": 4.0}
PREDICTED = {"data": 11.0, "hybrid": 6.0, "partitioned": 5.5, "hybrid-partitioned": 5.0}


def test_a_configuration_compares_the_choice_with_the_fastest_and_the_fixed_modes():
    c = compare(MEASURED, PREDICTED, "partitioned")
    errors = {name: entry["rel_error"] for name, entry in c["candidates"].items()}
    # (11 - 10) / 10, (6 - 8) / 8, (5.5 - 5) / 5, (5 - 4) / 4
    assert errors == pytest.approx(
        {"data": 0.1, "hybrid": -0.25, "partitioned": 0.1, "hybrid-partitioned": 0.25}
    )
    assert c["fastest"] == "hybrid-partitioned" and not c["choice_is_fastest"]
    assert c["slowdown"] == pytest.approx(5 / 4 - 1)
    assert c["gain_vs_data"] == pytest.approx(10 / 5)
    assert c["gain_vs_hybrid"] == pytest.approx(8 / 5)


def test_the_fastest_choice_has_no_slowdown_and_a_failed_run_is_kept_as_failed():
    measured = {**MEASURED, "hybrid-partitioned": None}
    c = compare(measured, PREDICTED, "partitioned")
    assert c["fastest"] == "partitioned" and c["choice_is_fastest"]
    assert c["slowdown"] == 0.0
    failed = c["candidates"]["hybrid-partitioned"]
    assert failed == {"measured": None, "predicted": 5.0, "rel_error": None}


def test_without_a_plan_or_with_a_failed_choice_the_figures_that_need_them_are_none():
    no_plan = compare(MEASURED, {}, None)
    assert no_plan["fastest"] == "hybrid-partitioned" and not no_plan["choice_is_fastest"]
    assert no_plan["slowdown"] is no_plan["gain_vs_data"] is no_plan["gain_vs_hybrid"] is None
    assert all(e["rel_error"] is None for e in no_plan["candidates"].values())
    chosen_failed = compare({**MEASURED, "hybrid": None}, PREDICTED, "hybrid")
    assert chosen_failed["slowdown"] is None and not chosen_failed["choice_is_fastest"]
    assert chosen_failed["gain_vs_data"] is None


def test_a_measurement_must_be_positive():
    with pytest.raises(ValueError, match="measured epoch of 'data' must be positive"):
        compare({"data": 0.0}, {}, None)


def test_the_summary_over_configurations():
    configurations = [
        # picks the fastest: slowdown 0; errors 0.1, 0.25, 0.1, 0.25
        compare({**MEASURED, "hybrid-partitioned": 6.0}, PREDICTED, "partitioned"),
        # picks partitioned, hybrid-partitioned is fastest: slowdown 0.25; same errors
        compare(MEASURED, PREDICTED, "partitioned"),
        # picks data (2.0) over hybrid (1.0): slowdown 1.0; errors |3-2|/2, |1.1-1|/1
        compare({"data": 2.0, "hybrid": 1.0}, {"data": 3.0, "hybrid": 1.1}, "data"),
        # no plan: counted, but not in the choice's figures; one run failed
        compare({"data": 1.0, "hybrid": None}, {}, None),
    ]
    # hybrid-partitioned 6 vs predicted 5: |5 - 6| / 6 replaces the first row's 0.25
    errors = [0.1, 0.25, 0.1, 1 / 6, 0.1, 0.25, 0.1, 0.25, 0.5, 0.1]
    s = summarize(configurations)
    assert s["configurations"] == 4 and s["planned"] == 3
    assert s["choice_fastest"] == 1 and s["choice_fastest_share"] == pytest.approx(1 / 3)
    assert s["worst_slowdown"] == pytest.approx(1.0)
    assert s["errors_counted"] == len(errors) == 10
    # sorted: 0.1 x5, 1/6, 0.25 x3, 0.5: the median is the mean of the 5th and 6th
    assert s["median_abs_error"] == pytest.approx((0.1 + 1 / 6) / 2)
    assert s["max_abs_error"] == pytest.approx(0.5)
    assert s["failed_runs"] == 1


def test_an_empty_summary_has_no_figures():
    s = summarize([])
    assert s["configurations"] == 0 and s["choice_fastest_share"] is None
    assert s["median_abs_error"] is None and s["worst_slowdown"] is None


def test_the_plan_is_read_by_its_contract():
    plan = {
        "choice": "hybrid",
        "reason": "wide features, narrow hidden layers",
        "workers": 2,
        "candidates": [
            {"name": "data", "parallel": "data", "partitioned": False, "epoch_s": 3.5},
            {"name": "hybrid", "parallel": "hybrid", "partitioned": False, "epoch_s": 2},
        ],
    }
    assert read_plan(plan) == ("hybrid", {"data": 3.5, "hybrid": 2.0})
    assert read_plan(None) == (None, {})


def test_the_measured_epoch_is_the_mean_after_the_first_not_the_final_lines():
    lines = [
        {"epoch": 1, "loss": 2.0, "epoch_s": 9.0},
        {"epoch": 2, "loss": 1.0, "epoch_s": 4.0},
        {"dataset": "d", "epochs": 2, "first_epoch_s": 9.0, "epoch_s": 7.5},
    ]
    assert epoch_seconds(lines, 2) == 4.0
    assert epoch_seconds(lines, 3) is None  # epoch 3's line is missing
    third = {"epoch": 3, "loss": 0.5, "epoch_s": 5.0}
    assert epoch_seconds([*lines[:2], third], 3) == pytest.approx((4.0 + 5.0) / 2)


TORCHRUN_FAILURE = """\
[W1207 06:16:23.307086822 socket.cpp:207] [c10d] The hostname cannot be retrieved. err=-3
ERROR graphengine: --parallel hybrid on --partitions is not available yet
E1207 06:16:30.495000 20704 torch/distributed/elastic/multiprocessing/api.py:1002] failed \
(exitcode: 2) local_rank: 0 (pid: 20724) of binary: python
Traceback (most recent call last):
    raise ChildFailedError(
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
graphengine FAILED
"""


def test_a_failed_runs_error_is_the_workers_line_not_torchruns_report():
    assert last_error_line(TORCHRUN_FAILURE) == (
        "ERROR graphengine: --parallel hybrid on --partitions is not available yet"
    )
    killed = TORCHRUN_FAILURE.replace("ERROR graphengine", "INFO graphengine")
    assert "failed (exitcode: 2)" in last_error_line(killed)
    assert last_error_line("") == "(no output)"
    assert last_error_line("one\nValueError: bad\n=====\n") == "ValueError: bad"


def test_the_dataset_keeps_synthetic_products_proportions():
    products = SYNTHETIC["synthetic-products"]
    spec = bench_spec(2**16, 512)
    assert spec.num_nodes == 2**16 and spec.num_features == 512
    assert spec.num_edges == round(products.num_edges / 16)
    assert spec.num_train == round(products.num_train / 16)
    assert spec.num_classes == products.num_classes


def test_the_options_select_a_smaller_run():
    args = build_parser().parse_args(
        ["bench", "plan", "--hosts", "2", "--widths", "100", "--hidden", "64"]
    )
    assert (args.hosts, args.widths, args.hidden) == ([2], [100], [64])
    assert args.links == ["fast", "slow"] and args.epochs == 2
    assert args.candidates == ["data", "hybrid", "partitioned", "hybrid-partitioned"]
    assert args.fanouts == [10, 5] and args.batch_size % 6 == 0 and math.log2(args.nodes) == 16
    with pytest.raises(SystemExit):
        build_parser().parse_args(["bench", "plan", "--candidates", "data,pipeline"])


def test_a_batch_that_the_hosts_cannot_share_is_refused():
    with pytest.raises(ValueError, match="'batch_size' 1000 must be a multiple"):
        BenchConfig([2, 3], ["fast"], [100], [64], ["data"], batch_size=1000)
    with pytest.raises(ValueError, match="'epochs' must be at least 2"):
        BenchConfig([2], ["fast"], [100], [64], ["data"], epochs=1)


def test_a_failed_run_is_printed_as_failed_with_its_error_and_the_json_line_comes_last(capsys):
    key = {"hosts": 2, "link": "slow", "rate_mbit": 900.0, "width": 512, "hidden": 64}
    measured = {**MEASURED, "hybrid-partitioned": None}
    result = {
        "key": key,
        "comparison": compare(measured, PREDICTED, "partitioned"),
        "plan_error": None,
        "plan_s": 20.0,
        "errors": {"hybrid-partitioned": "host 1: ValueError: bad part"},
    }
    flat = {**key, **result["comparison"], "plan_s": 20.0, "errors": result["errors"]}
    summary = {"bench": "plan", "accuracy": False, "results": [flat]}
    print_tables([result], summary)
    lines = capsys.readouterr().out.splitlines()
    row = next(line for line in lines if "hybrid-partitioned" in line and "failed" in line)
    assert row.split()[5:8] == ["failed", "5", "-"]  # measured, predicted, error
    chosen = next(line for line in lines if " partitioned " in line)
    assert chosen.split()[-2:] == ["choice", "fastest"]
    assert (
        "failed: hosts 2, link slow, width 512, hidden 64: hybrid-partitioned: host 1: "
        "ValueError: bad part" in lines
    )
    assert json.loads(lines[-1]) == summary


def test_the_bench_runs_the_planners_candidates():
    from graphengine.plan.candidates import CANDIDATES as PLAN_CANDIDATES

    assert tuple(PLAN_CANDIDATES) == CANDIDATES
