"""Card numbers: Luhn, tokens, masks, and scrubbing of logs and error bodies."""

from __future__ import annotations

import hashlib
import hmac
import logging
import random
import sys

import pytest

from api.logscrub import PanScrubFilter
from core.pan import PanTokenizer, is_pan, last4, looks_like_token, luhn_valid, mask, scrub

PAN = "4111111111111111"
SECRET = b"unit-test-secret-0123456789"


@pytest.mark.parametrize(
    "digits",
    ["4111111111111111", "5555555555554444", "378282246310005", "6011111111111117", "79927398713"],
)
def test_luhn_accepts_valid_numbers(digits: str) -> None:
    assert luhn_valid(digits)


FULLWIDTH_VALID = "".join(chr(ord(c) + 0xFEE0) for c in "79927398713")  # Unicode digits


@pytest.mark.parametrize("digits", ["4111111111111112", "79927398710", "12a4", "", FULLWIDTH_VALID])
def test_luhn_rejects_invalid_numbers(digits: str) -> None:
    assert not luhn_valid(digits)


def test_luhn_is_the_textbook_check_on_random_digit_strings() -> None:
    def textbook(digits: str) -> bool:
        total = 0
        for i, char in enumerate(reversed(digits)):
            d = int(char) * (2 if i % 2 else 1)
            total += d // 10 + d % 10
        return total % 10 == 0

    rng = random.Random(4)
    for _ in range(5000):
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 24)))
        assert luhn_valid(digits) == textbook(digits), digits


def test_is_pan_needs_12_to_19_digits() -> None:
    assert is_pan(PAN)
    assert not is_pan("79927398713")  # Luhn-valid but 11 digits
    assert not is_pan("4" + "0" * 18 + "4")  # 20 digits


def test_token_is_deterministic_keyed_and_card_specific() -> None:
    tokenizer = PanTokenizer(SECRET)
    token = tokenizer.token(PAN)
    assert token == PanTokenizer(SECRET).token(PAN)  # same key: same token after a restart
    assert token != PanTokenizer(SECRET + b"x").token(PAN)  # another key: another token
    assert token != tokenizer.token("5555555555554444")
    assert token.startswith("tok_") and len(token) == 4 + 32
    assert token == "tok_" + hmac.new(SECRET, PAN.encode(), hashlib.sha256).hexdigest()[:32]
    assert tokenizer.token(PAN) == token  # the keyed state is copied, never consumed
    assert looks_like_token(token)
    assert PAN not in token


def test_token_length_is_configurable_and_secret_must_be_long() -> None:
    assert len(PanTokenizer(SECRET, hex_chars=16).token(PAN)) == 4 + 16
    with pytest.raises(ValueError, match="at least 16 bytes"):
        PanTokenizer(b"short")
    assert "unit-test-secret" not in repr(PanTokenizer(SECRET))


def test_mask_and_last4() -> None:
    assert last4(PAN) == "1111"
    assert mask(PAN) == "************1111"


def test_scrub_masks_pans_in_text_numbers_and_nested_values() -> None:
    value = {
        "a": f"card {PAN} here",
        "b": [int(PAN), "4111 1111 1111 1111", "4111-1111-1111-1111"],
        "c": ("keep 1767225600001", 200),
    }
    out = scrub(value)
    assert PAN not in str(out)
    assert "4111 1111 1111 1111" not in str(out)
    assert out["a"] == "card ************1111 here"
    assert out["b"][0] == "************1111"
    # Not Luhn-valid, or not a card-sized run: left alone.
    assert out["c"] == ["keep 1767225600001", 200]
    assert scrub(True) is True


def _formatted(record: logging.LogRecord) -> str:
    PanScrubFilter().filter(record)
    return logging.Formatter("%(message)s").format(record)


def test_log_filter_masks_access_lines() -> None:
    record = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5000", "GET", f"/v1/cards/{PAN}/last-use", "1.1", 404),
        None,
    )
    line = _formatted(record)
    assert PAN not in line
    assert "/v1/cards/************1111/last-use" in line
    assert line.endswith("404")


def test_log_filter_masks_messages_and_tracebacks() -> None:
    try:
        raise ValueError(f"bad card {PAN}")
    except ValueError:
        exc_info = sys.exc_info()
    record = logging.LogRecord(
        "api", logging.ERROR, __file__, 1, f"failed for {PAN}", None, exc_info
    )
    text = _formatted(record)
    assert PAN not in text
    assert "ValueError: bad card ************1111" in text
    assert "failed for ************1111" in text
