"""The parallel-strategy planner: which of data, hybrid, partitioned and hybrid-on-partitions
training is fastest here, predicted from rates probed in the real process group
(:mod:`.probes`) and volumes counted from sampled batches (:mod:`.volumes`) by one cost
model (:mod:`.cost_model`) for each of the candidates (:mod:`.candidates`); the probe passes
are in :mod:`.probe_runs`, the choice in :mod:`.planner`."""

from graphengine.plan.candidates import CANDIDATES, Candidate
from graphengine.plan.cost_model import Link, Prediction, predict
from graphengine.plan.planner import Plan, choose, make_plan
from graphengine.plan.probes import Rates
from graphengine.plan.volumes import BatchCounts, Memory, Volumes, traffic_formulas

__all__ = [
    "CANDIDATES",
    "BatchCounts",
    "Candidate",
    "Link",
    "Memory",
    "Plan",
    "Prediction",
    "Rates",
    "Volumes",
    "choose",
    "make_plan",
    "predict",
    "traffic_formulas",
]
