"""Payer devices: the phone, laptop or browser a holder pays from (`device_id`).

Each holder owns a few devices, which the issuer's profile lists (`cards.profile/1`
`devices`). An online purchase comes from one of them; a card-present one is paid with the
phone's wallet (the holder's first device) at the card's `wallet_share`, else by plastic (no
device). Mail and telephone orders (`card_not_present`) carry no device. At the card's
`new_device_share`, an online or wallet purchase comes from a device the issuer has not seen
(a new phone, a borrowed laptop, a cleared browser): a legitimate purchase that looks like a
stranger's.

Fraud decides its own payer (`Uses.payer`): a takeover's taker pays from a device of their own
(a stranger's, from a shared pool), a card tester's bot too, a clone with plastic. Uses left
`HOLDER` are assigned here, from the holder's habits, with this module's own random stream,
so adding devices changes no other draw of the scenario.
"""

from __future__ import annotations

import numpy as np

from scenarios.cards.config import CardSettings
from scenarios.cards.merchants import CARD_NOT_PRESENT, CARD_PRESENT, Merchants

NO_DEVICE, HOLDER = -1, -2  # payer codes: plastic or none; decided by the holder's habits
MAX_DEVICES = 4


class PayerDevices:
    """Device codes: card i owns codes `i * MAX_DEVICES + j` for j < its count; strangers'
    devices follow. `ids[code]` is the device id on the wire."""

    def __init__(
        self, n_cards: int, settings: CardSettings, merchants: Merchants, rng: np.random.Generator
    ) -> None:
        self.rng = rng
        devices = np.rint(settings.devices.sample(rng, n_cards))
        self.count = np.clip(devices, 1, MAX_DEVICES).astype(np.int64)
        self.wallet_share = np.clip(settings.wallet_share.sample(rng, n_cards), 0.0, 1.0)
        self.new_share = np.clip(settings.new_device_share.sample(rng, n_cards), 0.0, 1.0)
        self.first_stranger = n_cards * MAX_DEVICES
        self.n_strangers = max(n_cards, 1)
        # letters only: an id never holds a digit run that could pass for a card number
        letters = rng.integers(97, 123, (self.first_stranger + self.n_strangers, 12), np.uint8)
        self.ids = np.array(
            ["dv-" + v for v in letters.view("S12").ravel().astype(str).tolist()], dtype=object
        )
        self._channel = merchants.channel

    def known(self, card: int) -> list[str]:
        """The device ids the issuer's profile lists for `card`."""
        first = card * MAX_DEVICES
        return self.ids[first : first + int(self.count[card])].tolist()

    def strangers(self, n: int) -> np.ndarray:
        """Codes of `n` devices no profile lists (drawn from the shared pool)."""
        return self.first_stranger + self.rng.integers(0, self.n_strangers, n)

    def assign(self, ent: np.ndarray, dev: np.ndarray, payer: np.ndarray) -> np.ndarray:
        """Payer codes of uses: `HOLDER` ones from the holders' habits; none for mail and
        telephone orders whatever was planned."""
        out = payer.astype(np.int64)
        todo = np.flatnonzero(out == HOLDER)
        if todo.size:
            out[todo] = self._holders(ent[todo], dev[todo])
        channel = self._channel[dev]
        out[channel == CARD_NOT_PRESENT] = NO_DEVICE
        return out

    def _holders(self, ent: np.ndarray, dev: np.ndarray) -> np.ndarray:
        rng, n = self.rng, ent.shape[0]
        own = ent.astype(np.int64) * MAX_DEVICES + (rng.random(n) * self.count[ent]).astype(
            np.int64
        )
        present = self._channel[dev] == CARD_PRESENT
        wallet = rng.random(n) < self.wallet_share[ent]
        own = np.where(present, ent.astype(np.int64) * MAX_DEVICES, own)  # the phone
        new = rng.random(n) < self.new_share[ent]
        codes = np.where(new, self.strangers(n), own)
        return np.where(present & ~wallet, NO_DEVICE, codes)

    def fragments(self) -> np.ndarray:
        """`"device_id":...` JSON fragments by code, `NO_DEVICE` (-1) last: null."""
        ids = [b'"device_id":"%s"' % i.encode() for i in self.ids.tolist()]
        return np.array([*ids, b'"device_id":null'], dtype=object)
