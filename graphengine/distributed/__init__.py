"""torch.distributed glue: launching workers under torchrun, joining and leaving the group."""

from graphengine.distributed.launch import (
    finish,
    join,
    launch,
    launched_by_torchrun,
    local_device,
    rank_and_world,
)

__all__ = ["finish", "join", "launch", "launched_by_torchrun", "local_device", "rank_and_world"]
