"""Which seeds go into which mini-batch, and with which random seed."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch

from samplers.seeds import MAX_SEED, mix_seed


@dataclass(frozen=True)
class BatchRequest:
    """One mini-batch to sample: positions into the loader's input nodes, and its random seed."""

    index: np.ndarray
    seed: int


def check_seed(seed) -> int | None:
    """``seed`` as a Python int in ``[0, MAX_SEED]`` (NumPy integers included: the mixing
    needs Python ints), or ``None`` (draw one per epoch). Every loader takes its seed through
    this: the mixing reads a seed modulo ``2^64``, so ``2^64`` would give seed 0's batches.

    Raises:
        TypeError: not an int or ``None``.
        ValueError: outside ``[0, MAX_SEED]``.
    """
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"'seed' must be an int or None (got {seed!r})")
    if not 0 <= seed <= MAX_SEED:
        raise ValueError(f"'seed' must be in [0, 2^63 - 1] (got {int(seed)})")
    return int(seed)


def derive_seed(*parts: int) -> int:
    """A 63-bit non-negative seed mixed from integers (e.g. base seed, epoch, batch number),
    by :func:`samplers.seeds.mix_seed` (numpy's ``SeedSequence``); once per batch."""
    return mix_seed(*parts) >> 1


def epoch_order(num_seeds: int, shuffle: bool, seed: int) -> np.ndarray:
    """The order of ``num_seeds`` input positions in one epoch (int64): a permutation drawn
    from ``seed`` when ``shuffle``, else ascending."""
    if not shuffle:
        return np.arange(num_seeds, dtype=np.int64)
    generator = torch.Generator().manual_seed(seed)
    return torch.randperm(num_seeds, generator=generator).numpy()


class SeedBatches:
    """Splits ``num_seeds`` input positions into batches, shuffled per epoch if asked.

    Each epoch draws its base seed from ``seed`` and the epoch number, or, when
    ``seed`` is ``None``, from torch's global generator (so ``torch.manual_seed``
    makes runs repeatable, as in PyG). Batch ``b`` gets seed ``derive_seed(base, b)``.

    With ``world_size > 1`` (data-parallel training), every rank orders all seeds the
    same way and takes its own contiguous share, all shares of one length: the order is
    cut to a multiple of ``world_size`` (``drop_last``) or padded by repeating its start,
    so that every rank runs the same number of batches and none waits forever for
    another at a collective. Rank ``r``'s batch ``b`` gets seed ``derive_seed(base, r, b)``.
    """

    def __init__(
        self,
        num_seeds: int,
        batch_size: int,
        shuffle: bool,
        drop_last: bool,
        seed: int | None,
        rank: int = 0,
        world_size: int = 1,
    ):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"'batch_size' must be a positive int (got {batch_size!r})")
        if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
            raise ValueError(f"'world_size' must be an int >= 1 (got {world_size!r})")
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < world_size:
            raise ValueError(f"'rank' must be in [0, {world_size}) (got {rank!r})")
        if world_size > 1 and seed is None:
            raise ValueError("data-parallel loading needs a 'seed' that every rank shares")
        self.num_seeds = num_seeds
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.drop_last = drop_last
        self.seed = check_seed(seed)
        self.rank = rank
        self.world_size = world_size
        self.epoch = 0

    @property
    def share(self) -> int:
        """How many seeds this rank gets per epoch."""
        if self.world_size == 1:
            return self.num_seeds
        if self.drop_last:
            return self.num_seeds // self.world_size
        return -(-self.num_seeds // self.world_size)

    def __len__(self) -> int:
        if self.drop_last:
            return self.share // self.batch_size
        return -(-self.share // self.batch_size)

    def __iter__(self) -> Iterator[BatchRequest]:
        if self.seed is None:
            base = int(torch.randint(0, 2**62, (), dtype=torch.int64))
        else:
            base = derive_seed(self.seed, self.epoch)
        self.epoch += 1
        order = epoch_order(self.num_seeds, self.shuffle, derive_seed(base, 1 << 40))
        if self.world_size > 1:
            share = self.share
            order = np.resize(order, share * self.world_size)  # pads by repeating the start
            order = order[self.rank * share : (self.rank + 1) * share]
        for b in range(len(self)):
            index = order[b * self.batch_size : (b + 1) * self.batch_size]
            seed = derive_seed(base, b) if self.world_size == 1 else derive_seed(base, self.rank, b)
            yield BatchRequest(index=index, seed=seed)


class OwnSeedBatches:
    """This worker's seeds in ``num_batches`` batches per epoch, of sizes differing by at most
    one, shuffled per epoch if asked; batch ``b`` of rank ``r`` gets seed
    ``derive_seed(base, r, b)`` with ``base = derive_seed(seed, epoch)``.

    Every worker runs ``num_batches`` batches, whatever its number of seeds, so that none
    waits forever for another at an exchange.
    """

    def __init__(self, num_seeds: int, num_batches: int, shuffle: bool, seed: int, rank: int):
        if seed is None:
            raise ValueError("each worker's batches need a 'seed' that every worker shares")
        self.num_seeds = num_seeds
        self.num_batches = num_batches
        self.shuffle = shuffle
        self.seed = check_seed(seed)
        self.rank = rank
        self.epoch = 0

    def __len__(self) -> int:
        return self.num_batches

    def __iter__(self) -> Iterator[BatchRequest]:
        base = derive_seed(self.seed, self.epoch)
        self.epoch += 1
        order = epoch_order(self.num_seeds, self.shuffle, derive_seed(base, self.rank, 1 << 40))
        for b, index in enumerate(np.array_split(order, self.num_batches)):
            yield BatchRequest(index=index, seed=derive_seed(base, self.rank, b))
