"""build_model refuses a model too large to train in the memory left, before allocating it."""

import pytest

from graphengine.nn import models
from graphengine.nn.models import build_model


@pytest.mark.parametrize("name", ["sage", "gcn", "gin", "gat"])
def test_a_model_needing_more_than_the_memory_available_is_refused(monkeypatch, name):
    model = build_model(name, 32, 64, 8, 2)
    # Parameters, gradients and Adam's two moments, counted on the model built for real.
    needed = 4 * sum(p.numel() * p.element_size() for p in model.parameters())
    monkeypatch.setattr(models, "available_memory", lambda: needed)
    build_model(name, 32, 64, 8, 2)  # just fits
    monkeypatch.setattr(models, "available_memory", lambda: needed - 1)
    with pytest.raises(ValueError, match=f"the {name} model of 64 hidden channels needs .* GiB"):
        build_model(name, 32, 64, 8, 2)


def test_a_huge_hidden_width_is_refused_without_allocating_it():
    """10^6 hidden channels: terabytes of weights, measured on the meta device (it used to
    end in the allocator's traceback)."""
    with pytest.raises(ValueError, match=r"needs \d+\.\d GiB to train .* lower the hidden"):
        build_model("sage", 32, 10**6, 8, 3)
