"""Card numbers (PANs): Luhn, tokenization, masking, scrubbing, and the token secret.

Every component that sees a card number uses this module, so the simulator, the fraud endpoint
and the pipeline agree on tokens. Outside the endpoint's request body (and the simulator's POS
requests) a PAN only ever appears as its token and last 4 digits:

- `PanTokenizer.token(pan)`: a keyed HMAC-SHA256 of the PAN, truncated. The same secret gives
  the same token for the same card, across restarts, endpoint instances and the simulator;
  without the secret a token cannot be brute-forced back to its PAN.
- `pan_secret(stack)`: the secret: $STREAMSIM_PAN_SECRET, else a random key created once in
  `<dirs.data>/api/pan-secret` (mode 0600) and reused.
- `last4(pan)`, `mask(pan)`: what a receipt shows.
- `make_pans(rng, n, prefixes, length)`: distinct fake Luhn-valid PANs, vectorised (the card
  scenario's and the load test's), with `luhn_check_digits(body)`.
- `scrub(value)`: replaces anything that looks like a PAN (12 to 19 digits, optionally split by
  spaces or dashes, Luhn-valid) in strings, numbers, lists and dicts; for 422 bodies and logs.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from core.errors import StreamsimError

if TYPE_CHECKING:
    from core.config import StackConfig

PAN_MIN_DIGITS, PAN_MAX_DIGITS = 12, 19
TOKEN_PREFIX = "tok_"
REDACTED = "[redacted]"
PAN_SECRET_ENV = "STREAMSIM_PAN_SECRET"
MIN_SECRET_BYTES = 16

#: 12-19 digits, each pair optionally separated by one space or dash, not inside a longer run.
_CANDIDATE = re.compile(r"(?<![\d])\d(?:[ -]?\d){11,18}(?![\d])")
_TOKEN = re.compile(rf"^{TOKEN_PREFIX}[0-9a-f]{{8,64}}$")
#: ASCII digit -> its value, and -> the digit sum of twice its value (Luhn).
_DIGIT = bytes.maketrans(b"0123456789", bytes(range(10)))
_DOUBLED = bytes.maketrans(b"0123456789", bytes([0, 2, 4, 6, 8, 1, 3, 5, 7, 9]))


def luhn_valid(digits: str) -> bool:
    """True when `digits` (ASCII digits only) passes the Luhn check.

    >>> luhn_valid("4111111111111111"), luhn_valid("4111111111111112")
    (True, False)
    """
    if not digits.isascii() or not digits.isdigit():
        return False
    right_to_left = digits.encode("ascii")[::-1]  # odd places as they are, even ones doubled
    total = sum(right_to_left[::2].translate(_DIGIT)) + sum(right_to_left[1::2].translate(_DOUBLED))
    return total % 10 == 0


def is_pan(value: str) -> bool:
    """12-19 ASCII digits, Luhn-valid."""
    return PAN_MIN_DIGITS <= len(value) <= PAN_MAX_DIGITS and luhn_valid(value)


def luhn_check_digits(body: np.ndarray) -> np.ndarray:
    """The Luhn check digit for each row of digits (n, k): appended, the number is valid.

    >>> luhn_check_digits(np.array([[4, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]])).tolist()
    [1]
    """
    rev = body[:, ::-1].astype(np.int64)
    doubled = rev[:, 0::2] * 2
    doubled -= np.where(doubled > 9, 9, 0)
    total = doubled.sum(axis=1) + rev[:, 1::2].sum(axis=1)
    return np.asarray((10 - total % 10) % 10)


def make_pans(
    rng: np.random.Generator,
    n: int,
    prefixes: Sequence[str],
    length: int = 16,
    *,
    dtype: type[np.integer[Any]] = np.int8,
) -> list[str]:
    """`n` distinct Luhn-valid PANs of `length` digits, each starting with one of `prefixes`.
    `dtype` is that of the random digits drawn: it picks numpy's draw, so a seed's PANs
    depend on it (the card scenario draws int8, the load test int64)."""
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < n:
        k = n - len(out)
        choice = rng.integers(0, len(prefixes), k)
        digits = rng.integers(0, 10, (k, length - 1), dtype=dtype)
        for p, prefix in enumerate(prefixes):
            rows = choice == p
            digits[rows, : len(prefix)] = np.frombuffer(prefix.encode(), np.uint8) - 48
        full = np.concatenate([digits, luhn_check_digits(digits)[:, None]], axis=1)
        text = (full.astype(np.uint8) + 48).tobytes().decode()
        for i in range(k):
            pan = text[i * length : (i + 1) * length]
            if pan not in seen:
                seen.add(pan)
                out.append(pan)
    return out


def last4(pan: str) -> str:
    return pan[-4:]


def mask(pan: str) -> str:
    """`4111111111111111` -> `************1111`."""
    return "*" * (len(pan) - 4) + pan[-4:]


def looks_like_token(value: str) -> bool:
    return bool(_TOKEN.match(value))


class PanTokenizer:
    """Deterministic keyed tokens: `tok_` + the first `hex_chars` of HMAC-SHA256(secret, PAN).

    >>> tokenizer = PanTokenizer(b"a-secret-of-16-bytes", hex_chars=16)
    >>> tokenizer.token("4111111111111111") == tokenizer.token("4111111111111111")
    True
    >>> tokenizer.token("4111111111111111").startswith("tok_")
    True
    """

    __slots__ = ("_hex_chars", "_keyed")

    def __init__(self, secret: bytes, hex_chars: int = 32) -> None:
        if len(secret) < MIN_SECRET_BYTES:
            raise ValueError("the PAN secret must be at least 16 bytes")
        if not 16 <= hex_chars <= 64:
            raise ValueError("hex_chars must be in [16, 64]")
        self._keyed = hmac.new(secret, digestmod=hashlib.sha256)  # copied per token: no re-keying
        self._hex_chars = hex_chars

    def token(self, pan: str) -> str:
        mac = self._keyed.copy()
        mac.update(pan.encode("ascii"))
        return TOKEN_PREFIX + mac.hexdigest()[: self._hex_chars]

    def __repr__(self) -> str:  # never show the key
        return f"PanTokenizer(hex_chars={self._hex_chars})"


def _mask_match(match: re.Match[str]) -> str:
    text = match.group(0)
    digits = text.replace(" ", "").replace("-", "")
    return mask(digits) if luhn_valid(digits) else text


def scrub_text(text: str) -> str:
    """Mask every PAN-like digit run in `text`.

    >>> scrub_text("card 4111 1111 1111 1111 declined")
    'card ************1111 declined'
    """
    if len(text) < PAN_MIN_DIGITS:
        return text
    return _CANDIDATE.sub(_mask_match, text)


def scrub(value: Any) -> Any:
    """`value` with every PAN-like string or integer masked, recursively."""
    if isinstance(value, str):
        return scrub_text(value)
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        text = str(value)
        return mask(text) if is_pan(text) else value
    if isinstance(value, dict):
        return {k: scrub(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub(v) for v in value]
    return value


def pan_secret(stack: StackConfig) -> bytes:
    """The HMAC key of card tokens: $STREAMSIM_PAN_SECRET, else the key stored in
    `<dirs.data>/api/pan-secret`, created (random, mode 0600) on first use. Every component
    that tokenizes cards for one topic needs the same key."""
    value = os.environ.get(PAN_SECRET_ENV)
    if value:
        if len(value.encode()) < MIN_SECRET_BYTES:
            raise StreamsimError(f"{PAN_SECRET_ENV} must be at least {MIN_SECRET_BYTES} bytes long")
        return value.encode()
    return stored_secret(secret_path(stack))


def secret_path(stack: StackConfig) -> Path:
    return Path(stack.dirs.data) / "api" / "pan-secret"


def stored_secret(path: Path) -> bytes:
    """The key in `path`, created there first if missing (safe against a concurrent creator)."""
    if path.exists():
        secret = path.read_bytes().strip()
        if len(secret) < MIN_SECRET_BYTES:
            raise StreamsimError(f"{path} holds a PAN secret shorter than 16 bytes; delete it")
        return secret
    path.parent.mkdir(parents=True, exist_ok=True)
    secret = secrets.token_hex(32).encode()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process created it first
        return path.read_bytes().strip()
    with os.fdopen(fd, "wb") as out:
        out.write(secret)
    return secret
