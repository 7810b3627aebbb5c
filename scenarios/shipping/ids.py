"""Identifiers with real check digits: IMO ship numbers and ISO 6346 container numbers."""

from __future__ import annotations

import numpy as np


def imo_numbers(count: int, rng: np.random.Generator) -> list[str]:
    """Distinct 'IMO9xxxxxx' numbers: six digits and a check digit (sum of digit x (7..2))."""
    body = 900_000 + rng.choice(100_000, size=count, replace=False)
    out = []
    for b in body.tolist():
        digits = [int(c) for c in f"{b:06d}"]
        check = sum(d * w for d, w in zip(digits, range(7, 1, -1), strict=True)) % 10
        out.append(f"IMO{b:06d}{check}")
    return out


def _letter_values() -> dict[str, int]:
    values, v = {}, 10
    for ch in "ABCDEFGHIJKLMNOPQRSTUVWXYZ":
        if v % 11 == 0:
            v += 1
        values[ch] = v
        v += 1
    return values


_LETTERS = _letter_values()


def iso6346(owner_code: str, serial: int) -> str:
    """A container number: 3-letter owner code, 'U' (freight container), 6 digits, check digit."""
    head = f"{owner_code}U{serial:06d}"
    total = sum((_LETTERS[c] if c.isalpha() else int(c)) * (1 << i) for i, c in enumerate(head))
    return f"{head}{total % 11 % 10}"
