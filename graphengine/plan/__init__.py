"""The parallel-strategy planner: which of data, hybrid, partitioned and hybrid-on-partitions
training is fastest here, predicted from rates probed in the real process group
(:mod:`.probes`) and volumes counted from sampled batches (:mod:`.volumes`) by one cost
model (:mod:`.cost_model`); the candidates and the choice are in :mod:`.planner`."""

from graphengine.plan.cost_model import Link, Prediction, predict
from graphengine.plan.planner import CANDIDATES, Candidate, Plan, choose, make_plan
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
