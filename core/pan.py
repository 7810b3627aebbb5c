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
- `find_pan(text)`: the first card number written into a string, the one rule every field but
  the card number itself is checked with (the endpoint rejects what it finds).
- `scrub(value)`: replaces anything that looks like a PAN in strings, numbers, lists and dicts;
  for 422 bodies and logs. Stricter than `find_pan`: it also masks a PAN with digits glued on.

What counts as written-out digits: a run of ASCII digits in which up to 3 separators (anything
but an ASCII letter or digit: space, `-`, `.`, `/`, `:`, `_`, ...) may stand between any two
digits. Such a run holds a PAN when
- (`find_pan`) whole groups of it (digits between separators), next to each other, make 12 to
  19 digits that pass the Luhn check: `4111-1111-1111-1111`, `4111.1111.1111.1111`,
  `ref 2026-4111111111111111`;
- (`scrub`) any 12 to 19 consecutive digits of it pass the Luhn check, groups or not:
  `41111111111111112` too. About 1 in 10 such windows passes by chance, so a long number
  (a client address with its port, an epoch in ms) is sometimes masked in a log line.
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

#: Digits with at most 3 separators (not an ASCII letter or digit) between any two of them.
_RUN = re.compile(r"[0-9](?:[^0-9A-Za-z]{0,3}[0-9])*")
_GROUP = re.compile(r"[0-9]+")
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


def _grouped_pan(groups: list[str]) -> str | None:
    """The first run of whole consecutive groups with 12-19 digits that passes Luhn."""
    for i in range(len(groups)):
        digits = ""
        for group in groups[i:]:
            digits += group
            if len(digits) > PAN_MAX_DIGITS:
                break
            if len(digits) >= PAN_MIN_DIGITS and luhn_valid(digits):
                return digits
    return None


def _has_pan_window(digits: str) -> bool:
    """Whether any 12-19 consecutive digits of `digits` pass Luhn (prefix sums: O(8 n))."""
    n = len(digits)
    if n < PAN_MIN_DIGITS:
        return False
    # sums[p][k]: Luhn terms of digits[:k], the digits at positions of parity p doubled. A
    # window [i, j) doubles the digits at positions of j's parity (every second from its end).
    plain = digits.encode("ascii").translate(_DIGIT)
    doubled = digits.encode("ascii").translate(_DOUBLED)
    sums = ([0] * (n + 1), [0] * (n + 1))
    for k in range(n):
        for p in (0, 1):
            sums[p][k + 1] = sums[p][k] + (doubled[k] if k % 2 == p else plain[k])
    for j in range(PAN_MIN_DIGITS, n + 1):
        s = sums[j % 2]
        for length in range(PAN_MIN_DIGITS, min(PAN_MAX_DIGITS, j) + 1):
            if (s[j] - s[j - length]) % 10 == 0:
                return True
    return False


def find_pan(text: str) -> str | None:
    """The first card number written into `text` (its digits), or None; see the module doc.

    >>> find_pan("tx-4111.1111.1111.1111"), find_pan("order 2026-4111111111111111-7")
    ('4111111111111111', '4111111111111111')
    >>> find_pan("tx-000123"), find_pan("1767225600001")
    (None, None)
    """
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) - len(raw.translate(None, b"0123456789")) < PAN_MIN_DIGITS:  # the usual id
        return None
    for match in _RUN.finditer(text):
        run = match.group(0)
        if len(run) >= PAN_MIN_DIGITS:
            found = _grouped_pan(_GROUP.findall(run))
            if found is not None:
                return found
    return None


def _mask_run(match: re.Match[str]) -> str:
    text = match.group(0)
    digits = "".join(_GROUP.findall(text))
    return mask(digits) if _has_pan_window(digits) else text


def scrub_text(text: str) -> str:
    """Mask every digit run in `text` that holds a PAN, separators and glued digits included.

    >>> scrub_text("card 4111 1111 1111 1111 declined")
    'card ************1111 declined'
    >>> scrub_text("ref=41111111111111112;")
    'ref=*************1112;'
    """
    if len(text) < PAN_MIN_DIGITS:
        return text
    return _RUN.sub(_mask_run, text)


def scrub(value: Any) -> Any:
    """`value` with every PAN-like string or integer masked, recursively (dict keys too)."""
    if isinstance(value, str):
        return scrub_text(value)
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        try:
            text = str(value)
        except ValueError:  # more digits than Python prints
            return REDACTED
        return mask(text) if _has_pan_window(text) else value
    if isinstance(value, float):
        text = repr(value)
        return value if scrub_text(text) == text else scrub_text(text)
    if isinstance(value, dict):
        return {scrub(k): scrub(v) for k, v in value.items()}
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
