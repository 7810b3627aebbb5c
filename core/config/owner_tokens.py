"""Owner tokens: the bearer tokens that scope the shipping read routes to one container owner.

Where they come from (at start-up, validated then; the app does not start on a bad one):
- `STREAMSIM_OWNER_TOKENS_FILE`: a YAML (or JSON) file holding one mapping, owner -> token,
  readable by its user only (mode 0600 or stricter), e.g. a mounted secret;
- or `STREAMSIM_OWNER_TOKENS`: the same mapping as a JSON object in the environment.
Neither set: the owner routes are disabled (401 without a token, 403 with one), as the control
routes are without `STREAMSIM_API_TOKEN`.

Rules: owner names as in the scenario's `domain.owners` (letters, digits, `_`, `-`, `.`; up to
64); tokens of 16 to 512 printable characters without spaces, one per owner (two owners with
one token could not be told apart) and none equal to the control token. Tokens are never
logged, printed or echoed in an error: messages name the owner only, and `repr()` hides them.

A request's token is compared with every owner's in constant time (`secrets.compare_digest`),
so timing says nothing about which owner or how much of a token matched.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from core.config.errors import ConfigError

TOKENS_ENV = "STREAMSIM_OWNER_TOKENS"
TOKENS_FILE_ENV = "STREAMSIM_OWNER_TOKENS_FILE"
OWNER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
TOKEN = re.compile(r"^[\x21-\x7e]{16,512}$")


class OwnerTokens:
    """Owner -> token, validated (see the module doc). `owner_of(token)` finds the owner."""

    def __init__(
        self,
        tokens: Mapping[str, str],
        *,
        control_token: str | None = None,
        source: str = "owner tokens",
    ) -> None:
        if not isinstance(tokens, Mapping) or not tokens:
            raise ConfigError(source, ["expected a non-empty mapping of owner -> token"])
        seen: dict[str, str] = {}
        for owner, token in tokens.items():
            if not isinstance(owner, str) or not OWNER.match(owner):
                raise ConfigError(
                    source,
                    [
                        f"key {str(owner)[:70]!r} is not an owner name (letters, digits, '_', "
                        "'-', '.'; up to 64 characters)"
                    ],
                )
            if not isinstance(token, str) or not TOKEN.match(token):
                raise ConfigError(
                    source,
                    [
                        f"key {owner!r}: a token must be 16 to 512 printable characters without "
                        "spaces (e.g. `python -c 'import secrets; "
                        "print(secrets.token_urlsafe(32))'`); the value is not shown"
                    ],
                )
            for other, known in seen.items():
                if secrets.compare_digest(token.encode(), known.encode()):
                    raise ConfigError(
                        source, [f"keys {other!r} and {owner!r} share a token; give each its own"]
                    )
            if control_token is not None and secrets.compare_digest(
                token.encode(), control_token.encode()
            ):
                raise ConfigError(
                    source,
                    [
                        f"key {owner!r}: the token is the control token (STREAMSIM_API_TOKEN); "
                        "give the owner its own"
                    ],
                )
            seen[owner] = token
        self._tokens = tuple((owner, token.encode()) for owner, token in seen.items())

    @property
    def owners(self) -> list[str]:
        return [owner for owner, _ in self._tokens]

    def owner_of(self, token: str) -> str | None:
        """The owner whose token this is; every owner's token is compared (no early exit)."""
        given = token.encode()
        found = None
        for owner, expected in self._tokens:
            if secrets.compare_digest(given, expected):
                found = owner
        return found

    def __repr__(self) -> str:
        return f"OwnerTokens(owners={self.owners})"


def load_owner_tokens(control_token: str | None = None) -> OwnerTokens | None:
    """The owner tokens from `STREAMSIM_OWNER_TOKENS_FILE` or `STREAMSIM_OWNER_TOKENS`, or None
    when neither is set (owner routes disabled). Raises `ConfigError` (exit 2) on a bad one."""
    path, inline = os.environ.get(TOKENS_FILE_ENV), os.environ.get(TOKENS_ENV)
    if path and inline:
        raise ConfigError(TOKENS_ENV, [f"set one of {TOKENS_FILE_ENV} and {TOKENS_ENV}, not both"])
    if path:
        return OwnerTokens(_read_file(Path(path)), control_token=control_token, source=path)
    if inline:
        try:
            data = json.loads(inline)
        except json.JSONDecodeError as exc:  # the message holds no part of the value
            raise ConfigError(
                TOKENS_ENV,
                [
                    f"not JSON (line {exc.lineno}, column {exc.colno}); expected an object like "
                    '{"bigblue": "<token>"}'
                ],
            ) from None
        return OwnerTokens(data, control_token=control_token, source=TOKENS_ENV)
    return None


def _read_file(path: Path) -> Any:
    try:
        mode = path.stat().st_mode
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(path, [f"cannot read it ({exc.strerror}; {TOKENS_FILE_ENV})"]) from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigError(
            path, [f"open to others (mode {stat.S_IMODE(mode):o}); `chmod 600 {path}`"]
        )
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:  # the error quotes the text: say where only
        raise ConfigError(path, ["not YAML; expected one mapping of owner -> token"]) from None
