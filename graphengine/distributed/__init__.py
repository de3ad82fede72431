"""torch.distributed glue: launching workers under torchrun, joining and leaving the group."""

from graphengine.distributed.launch import (
    INTERRUPTED,
    finish,
    join,
    launch,
    launched_by_torchrun,
    local_device,
)

__all__ = ["INTERRUPTED", "finish", "join", "launch", "launched_by_torchrun", "local_device"]
