"""Independent, named random streams from one seed: same seed and name, same numbers, anywhere.

Streams are children of `SeedSequence(seed)` with a spawn key derived from the component's name
(CRC-32, stable across runs and machines), so adding a component never shifts another's draws.
"""

from __future__ import annotations

import zlib

import numpy as np


def rng_for(seed: int, *names: str) -> np.random.Generator:
    key = tuple(zlib.crc32(name.encode()) for name in names)
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=key)))


def id_salt(seed: int, run_id: str | None = None) -> str:
    """8 hex digits that make ids from different seeds (and runs) distinct.

    >>> id_salt(4) == id_salt(4), id_salt(4) == id_salt(4, "run-2")
    (True, False)
    """
    entropy = seed if run_id is None else [seed, zlib.crc32(run_id.encode())]
    return f"{int(np.random.SeedSequence(entropy).generate_state(1)[0]):08x}"
