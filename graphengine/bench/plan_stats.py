"""The arithmetic of ``graphengine bench plan``: from each configuration's measured epoch
seconds (every candidate run for real) and the planner's prediction and choice, how good
the choice and the predictions were. Pure functions of numbers; the runs are in
:mod:`graphengine.bench.plan`.

Per configuration (:func:`compare`):

- ``rel_error`` of a candidate: ``(predicted - measured) / measured``;
- ``fastest``: the candidate with the least measured epoch among those that ran;
- ``slowdown``: ``measured[choice] / measured[fastest] - 1`` (0 when the choice is the
  fastest);
- ``gain_vs_data`` / ``gain_vs_hybrid``: ``measured[data] / measured[choice]`` (and
  hybrid's): how many times faster the choice is than always picking that mode.

Over all configurations (:func:`summarize`): the share of configurations whose choice is
the measured fastest, the worst slowdown, and the median and largest ``|rel_error|`` over
every candidate with both a prediction and a measurement.
"""

from __future__ import annotations

import statistics

CANDIDATES = ("data", "hybrid", "partitioned", "hybrid-partitioned")
# fast: what the machine carries between two emulated hosts; slow: a fraction of it.
LINKS = ("fast", "slow")


def compare(
    measured: dict[str, float | None],
    predicted: dict[str, float | None],
    choice: str | None,
) -> dict:
    """One configuration's comparison.

    Args:
        measured: each candidate's measured epoch seconds; ``None`` for a run that failed.
        predicted: each candidate's predicted epoch seconds (from the plan); ``None`` or
            absent where the plan gave none (no plan, or a candidate it did not list).
        choice: the planner's choice; ``None`` when there is no plan.

    Returns:
        ``candidates``: per candidate ``measured``, ``predicted``, ``rel_error`` (``None``
        unless both are there); ``choice``, ``fastest`` (``None`` when no candidate ran),
        ``choice_is_fastest``, ``slowdown``, ``gain_vs_data``, ``gain_vs_hybrid`` (each
        ``None`` where a number it needs is missing).
    """
    for name, seconds in measured.items():
        if seconds is not None and not seconds > 0:
            raise ValueError(f"measured epoch of {name!r} must be positive (got {seconds})")
    candidates = {}
    for name in measured:
        real, guess = measured[name], predicted.get(name)
        error = (guess - real) / real if real is not None and guess is not None else None
        candidates[name] = {"measured": real, "predicted": guess, "rel_error": error}
    ran = {name: s for name, s in measured.items() if s is not None}
    fastest = min(ran, key=ran.__getitem__) if ran else None
    chosen = ran.get(choice) if choice is not None else None

    def ratio(numerator: float | None, denominator: float | None) -> float | None:
        if numerator is None or denominator is None:
            return None
        return numerator / denominator

    slowdown = ratio(chosen, ran.get(fastest))
    return {
        "candidates": candidates,
        "choice": choice,
        "fastest": fastest,
        "choice_is_fastest": choice is not None and choice == fastest,
        "slowdown": slowdown - 1 if slowdown is not None else None,
        "gain_vs_data": ratio(ran.get("data"), chosen),
        "gain_vs_hybrid": ratio(ran.get("hybrid"), chosen),
    }


def summarize(comparisons: list[dict]) -> dict:
    """The figures over all configurations' :func:`compare` results.

    ``choice_fastest_share``: configurations whose choice is the measured fastest over those
    with a choice (``None`` when none has one); ``worst_slowdown``: the largest slowdown (a
    choice whose run failed has none and counts as not fastest); ``median_abs_error`` and
    ``max_abs_error`` of ``|rel_error|`` over every candidate that has one, and
    ``errors_counted``; ``failed_runs``: candidates without a measurement.
    """
    planned = [c for c in comparisons if c["choice"] is not None]
    slowdowns = [c["slowdown"] for c in planned if c["slowdown"] is not None]
    errors = [
        abs(entry["rel_error"])
        for c in comparisons
        for entry in c["candidates"].values()
        if entry["rel_error"] is not None
    ]
    failed = sum(
        entry["measured"] is None for c in comparisons for entry in c["candidates"].values()
    )
    fastest = sum(c["choice_is_fastest"] for c in planned)
    return {
        "configurations": len(comparisons),
        "planned": len(planned),
        "choice_fastest": fastest,
        "choice_fastest_share": fastest / len(planned) if planned else None,
        "worst_slowdown": max(slowdowns) if slowdowns else None,
        "median_abs_error": statistics.median(errors) if errors else None,
        "max_abs_error": max(errors) if errors else None,
        "errors_counted": len(errors),
        "failed_runs": failed,
    }
