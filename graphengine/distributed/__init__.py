"""torch.distributed glue: launching workers under torchrun, joining and leaving the group,
naming a worker that stopped answering (:mod:`graphengine.distributed.liveness`), batched
all-to-all exchanges, sampling across the parts of a partitioned graph, and the parts' rows
redistributed to feature columns (hybrid on a partitioned graph). An
emulated cluster of hosts on this machine, to train across real links, is in
:mod:`graphengine.distributed.emulated_cluster`."""

from graphengine.distributed.columns import redistribute_columns
from graphengine.distributed.data import DistData
from graphengine.distributed.exchange import Exchange, ExchangeStats, new_exchange
from graphengine.distributed.launch import (
    INTERRUPTED,
    LOST_WORKER,
    ending_on_error,
    finish,
    join,
    launch,
    launched_by_torchrun,
    local_device,
    record_failure,
)
from graphengine.distributed.liveness import WorkerLost, lost_worker, naming_lost_workers
from graphengine.distributed.sampler import DistNeighborSampler, SamplingStats

__all__ = [
    "INTERRUPTED",
    "LOST_WORKER",
    "DistData",
    "DistNeighborSampler",
    "Exchange",
    "ExchangeStats",
    "SamplingStats",
    "WorkerLost",
    "ending_on_error",
    "finish",
    "join",
    "launch",
    "launched_by_torchrun",
    "local_device",
    "lost_worker",
    "naming_lost_workers",
    "new_exchange",
    "record_failure",
    "redistribute_columns",
]
