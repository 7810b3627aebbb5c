"""Card numbers in the endpoint: the shared PAN module (`core.pan`), re-exported.

Luhn, tokens, masks, scrubbing and the token secret live in `core.pan`, so the simulator
and the pipeline compute the same tokens as the endpoint.
"""

from core.pan import (
    PAN_MAX_DIGITS,
    PAN_MIN_DIGITS,
    REDACTED,
    TOKEN_PREFIX,
    PanTokenizer,
    is_pan,
    last4,
    looks_like_token,
    luhn_valid,
    mask,
    scrub,
    scrub_text,
)

__all__ = [
    "PAN_MAX_DIGITS",
    "PAN_MIN_DIGITS",
    "REDACTED",
    "TOKEN_PREFIX",
    "PanTokenizer",
    "is_pan",
    "last4",
    "looks_like_token",
    "luhn_valid",
    "mask",
    "scrub",
    "scrub_text",
]
