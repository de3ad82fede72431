"""Training: the loop (:class:`Trainer`), its configuration (:class:`TrainConfig`), the kinds
of training batches it picks from (:mod:`graphengine.train.batches`), evaluation and
checkpoints."""

from graphengine.train.config import TrainConfig
from graphengine.train.trainer import Trainer

__all__ = ["TrainConfig", "Trainer"]
