"""Which purchases a card's known devices leave a rule to judge: the rules that ask whether
the payer is the holder (`spending`'s takeover, `bloom`'s cash-out) gate on it alike.

- `any`: devices ignored;
- `not_known`: all but a purchase from a device the card's profile lists (the holder's own
  phone or browser);
- `new`: only a purchase from a device the profile does not list (a plastic card, with no
  device, is not judged).

    >>> known = frozenset({"dv-1"})
    >>> [device_judged(d, known, "new") for d in ("dv-1", "dv-2", None)]
    [False, True, False]
    >>> [device_judged(d, known, "not_known") for d in ("dv-1", "dv-2", None)]
    [False, True, True]
"""

from __future__ import annotations

from typing import Literal

DeviceGate = Literal["any", "not_known", "new"]
#: The gate's description, for the rules' params.
DEVICE_GATE_HELP = (
    "Which purchases the card profile's known devices leave to judge: `any` (devices ignored), "
    "`not_known` (all but those from a device the profile lists: the holder's own phone or "
    "browser), `new` (only those from a device it does not list; a plastic card, with no "
    "device, is not judged)."
)


def device_judged(device: str | None, known: frozenset[str], gate: DeviceGate) -> bool:
    """Whether a purchase from `device` (None: no device) is judged, given the card's known
    devices (empty without a profile)."""
    if gate == "any":
        return True
    if device is None:
        return gate == "not_known"
    return device not in known
