"""Card transactions as bytes: the `cards.transaction/1` event, or the endpoint's request body.

Both are one bytes template filled per row from columns, like the engine's own encoder; the card
and device parts (the terminal's, the payer's: `payer_fragments[code]`, -1 the last: null)
come from tables encoded once at set-up (`json_bytes`), so escaping is right:

    {"schema":"cards.transaction/1","event_id":"cv-3f2a9c1b-1e240","transaction_id":
     "cv-3f2a9c1b-1e240","card_token":"tok_...","card_last4":"1111","event_time":1767225600123,
     "seq":3,"amount":42.50,"currency":"EUR","merchant_id":"m-000042","merchant_category":"5411",
     "channel":"card_present","card_present":true,"lat":48.85660,"lon":2.35220,"country":"FR",
     "terminal_id":"t-0000007","device_id":null}

The event carries the card's token and last 4 digits only. The request body (POS mode) is the
one place the PAN appears: `TransactionRequest`'s fields, nothing more.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from core.contracts import CARD_TRANSACTION
from simulators.encoding import json_bytes

SCHEMA = CARD_TRANSACTION.id


def literals(values: np.ndarray) -> np.ndarray:
    """JSON string literals of an object array of few distinct strings (one bytes each)."""
    distinct, index = np.unique(values.astype(str), return_inverse=True)
    return np.array([json_bytes(v) for v in distinct], dtype=object)[index.reshape(-1)]


class TransactionEncoder:
    """`cards.transaction/1` events: the request's fields (PAN as token + last 4) + envelope."""

    def __init__(
        self,
        id_prefix: str,
        tokens: Sequence[str],
        last4: Sequence[str],
        currency: np.ndarray,
        device_fragments: np.ndarray,
        payer_fragments: np.ndarray,
    ) -> None:
        event_id = b'"' + id_prefix.encode() + b'%x"'
        self.template = (
            b'{"schema":' + json_bytes(SCHEMA) + b',"event_id":' + event_id
            + b',"transaction_id":' + event_id + b",%s"
            + b',"event_time":%d,"seq":%d,"amount":%.2f,"currency":%s,%s,%s}'
        )  # fmt: skip
        card = b'"card_token":"%s","card_last4":"%s"'  # tok_<hex> and 4 digits: no escaping
        self._cards = np.array(
            [card % (t.encode(), d.encode()) for t, d in zip(tokens, last4, strict=True)],
            dtype=object,
        )
        self._currency = literals(currency)
        self._devices = device_fragments
        self._payers = payer_fragments

    def encode(self, rows: np.ndarray) -> list[bytes]:
        gen = rows["gen"].tolist()
        ent = rows["ent"]
        columns = (
            gen,
            gen,
            self._cards[ent].tolist(),
            rows["event_ms"].tolist(),
            rows["seq"].tolist(),
            rows["amount"].tolist(),
            self._currency[ent].tolist(),
            self._devices[rows["dev"]].tolist(),
            self._payers[rows["payer"]].tolist(),
        )
        return list(map(self.template.__mod__, zip(*columns, strict=True)))


class RequestEncoder:
    """The endpoint's `TransactionRequest` body, PAN included: POS mode only."""

    def __init__(
        self,
        id_prefix: str,
        pans: Sequence[str],
        currency: np.ndarray,
        device_fragments: np.ndarray,
        payer_fragments: np.ndarray,
    ) -> None:
        self.template = (
            b'{"transaction_id":"' + id_prefix.encode() + b'%x","card_number":%s,'
            + b'"amount":%.2f,"currency":%s,%s,%s,"event_time":%d}'
        )  # fmt: skip
        self._pans = np.array([b'"%s"' % p.encode() for p in pans], dtype=object)  # digits
        self._currency = literals(currency)
        self._devices = device_fragments
        self._payers = payer_fragments

    def encode(self, rows: np.ndarray) -> list[bytes]:
        ent = rows["ent"]
        columns = (
            rows["gen"].tolist(),
            self._pans[ent].tolist(),
            rows["amount"].tolist(),
            self._currency[ent].tolist(),
            self._devices[rows["dev"]].tolist(),
            self._payers[rows["payer"]].tolist(),
            rows["event_ms"].tolist(),
        )
        return list(map(self.template.__mod__, zip(*columns, strict=True)))
