"""derive_seed and SeedBatches: deterministic, distinct, 63-bit seeds; batches cover the seeds."""

import itertools

import numpy as np
import pytest
from scipy.stats import chisquare

from graphengine.loader.seeds import SeedBatches, derive_seed


def test_derive_seed_is_deterministic_63_bit_and_distinct_per_parts():
    grid = list(itertools.product([0, 1, 2**40, 2**62 + 5], range(3), range(3), range(8)))
    seeds = [derive_seed(*parts) for parts in grid]
    assert seeds == [derive_seed(*parts) for parts in grid]
    assert all(isinstance(s, int) and 0 <= s < 2**63 for s in seeds)
    assert len(set(seeds)) == len(grid)


def test_derive_seed_separates_lengths_and_word_boundaries():
    # Plain SeedSequence entropy would mix each of these pairs into the same state.
    assert derive_seed(5) != derive_seed(5, 0)
    assert derive_seed(2**32) != derive_seed(0, 1)
    assert derive_seed(1, 2) != derive_seed(1 + 2 * 2**32)
    assert derive_seed() != derive_seed(0)


def test_derive_seed_takes_negative_parts_modulo_2_64():
    assert derive_seed(0, -1) == derive_seed(0, 2**64 - 1)
    assert 0 <= derive_seed(-5, -1) < 2**63
    assert derive_seed(0, -1) != derive_seed(0, 1)


def test_derive_seed_bits_look_uniform():
    seeds = np.array([derive_seed(3, b) for b in range(4096)], dtype=np.uint64)
    low = np.bincount((seeds & np.uint64(15)).astype(np.int64), minlength=16)
    high = np.bincount((seeds >> np.uint64(59)).astype(np.int64), minlength=16)
    assert chisquare(low).pvalue > 1e-4 and chisquare(high).pvalue > 1e-4


@pytest.mark.parametrize("shuffle", [False, True])
def test_seed_batches_cover_every_seed_once_with_distinct_seeds(shuffle):
    batches = SeedBatches(103, 10, shuffle, drop_last=False, seed=4)
    first = list(batches)
    assert len(first) == len(batches) == 11
    assert np.array_equal(np.sort(np.concatenate([r.index for r in first])), np.arange(103))
    assert (np.concatenate([r.index for r in first])[:10] != np.arange(10)).any() == shuffle
    assert len({r.seed for r in first}) == 11
    second = list(batches)  # the next epoch: new seeds
    assert not {r.seed for r in first} & {r.seed for r in second}
    batches.epoch = 0
    assert [r.seed for r in batches] == [r.seed for r in first]


def test_hop_keys_are_distinct_per_seed_and_hop():
    from samplers._kernels.random import hop_key
    from samplers.seeds import mix_seed

    keys = [hop_key(seed, hop) for seed in (0, 1, 2**40, -1) for hop in range(4)]
    assert len(set(keys)) == len(keys) and all(isinstance(k, np.uint64) for k in keys)
    assert keys == [hop_key(seed, hop) for seed in (0, 1, 2**40, -1) for hop in range(4)]
    assert int(hop_key(7, 1)) == mix_seed(7, 1) and mix_seed(-1) == mix_seed(2**64 - 1)
