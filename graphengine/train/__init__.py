"""Training: the loop (:class:`Trainer`), evaluation and checkpoints."""

from graphengine.train.trainer import Trainer

__all__ = ["Trainer"]
