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
    """8 hex digits that make ids from different seeds (and runs) distinct; the last is a
    letter. Ids are `<prefix>-<salt>-<counter in hex>`: digits at the end of the salt would
    join the counter's into a run of 12+ digits, which the fraud endpoint rejects when it
    passes the Luhn check (a card number in an id).

    >>> id_salt(4) == id_salt(4), id_salt(4) == id_salt(4, "run-2"), id_salt(4)[-1].isalpha()
    (True, False, True)
    """
    entropy = seed if run_id is None else [seed, zlib.crc32(run_id.encode())]
    salt = f"{int(np.random.SeedSequence(entropy).generate_state(1)[0]):08x}"
    return salt if salt[-1].isalpha() else salt[:-1] + "abcdef"[int(salt[-1]) % 6]
