"""Seeds mixed from several integers, by numpy's ``SeedSequence``."""

import numpy as np

#: The largest seed a loader (and the CLI's ``--seed``) takes: every seed in ``[0, MAX_SEED]``
#: gives batches of its own (torch's generators take up to ``2^64 - 1``, NumPy's and the
#: samplers' seeds are int64).
MAX_SEED = 2**63 - 1
_MASK64 = (1 << 64) - 1
_LOW32 = 0xFFFFFFFF


def mix_seed(*parts: int) -> int:
    """A 64-bit unsigned seed mixed from ``parts`` (any Python ints), e.g. (base seed, epoch,
    batch) or (batch seed, hop).

    numpy's ``SeedSequence`` does the mixing. Each part is taken modulo ``2**64`` (it rejects
    negative entropy, so ``-1`` and ``2**64 - 1`` mix alike) and passed as two uint32 words
    after a word counting the parts: given plain ints, it would mix ``(5,)`` and ``(5, 0)``,
    or ``(2**32,)`` and ``(0, 1)``, into the same state. It is slower than the hand-rolled
    SplitMix mixers it replaced, but it runs once per batch or hop, not per node.
    """
    words = [len(parts)]
    for part in parts:
        part &= _MASK64
        words += [part & _LOW32, part >> 32]
    state = np.random.SeedSequence(np.array(words, dtype=np.uint32)).generate_state(1, np.uint64)
    return int(state[0])
