"""Running PyG models on batches: blocks, per-batch forward modes, layer-wise inference, models."""

from graphengine.batch.blocks import Block, to_blocks
from graphengine.nn.blocks import block_conv, block_forward, supports_blocks, supports_layerwise
from graphengine.nn.forward import FORWARDS, SeedLogits
from graphengine.nn.inference import layerwise_inference
from graphengine.nn.models import MODELS, build_model

__all__ = [
    "FORWARDS",
    "MODELS",
    "Block",
    "SeedLogits",
    "block_conv",
    "block_forward",
    "build_model",
    "layerwise_inference",
    "supports_blocks",
    "supports_layerwise",
    "to_blocks",
]
