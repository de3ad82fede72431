"""What a loader hands a model: message-flow blocks (:mod:`graphengine.batch.blocks`) and the
hybrid-parallel batch (:mod:`graphengine.batch.hybrid`).

Loaders build these, ``nn/`` runs models on them and ``parallel/`` splits the work over
them; living below all three, they let none of those folders import another sideways.
"""

from graphengine.batch.blocks import Block, to_blocks
from graphengine.batch.hybrid import HybridBatch

__all__ = ["Block", "HybridBatch", "to_blocks"]
