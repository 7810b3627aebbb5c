"""The label types per scenario: what truth marks and what detectors name in their alerts.

`none` is the label of a normal event; the rest are snake_case fraud or fault types, in the
order the scenarios index them (a truth record's label is `("none", *TYPES)[i]`).
"""

from __future__ import annotations

NONE = "none"
CARD_FRAUDS = ("impossible_travel", "card_testing", "account_takeover", "compromised_terminal")
VEHICLE_FAULTS = (
    "overheating",
    "tyre_leak",
    "stuck_sensor",
    "gps_jump",
    "harsh_braking",
    "speeding",
    "battery_failure",
)
SHIPPING_FAULTS = (
    "reefer_failure",
    "lost_overboard",
    "door_tamper",
    "missed_unload",
    "route_deviation",
)
SENSOR_FAULTS = ("stuck_sensor", "spike", "silent_device")

#: Label types by scenario domain type (`domain.type` in a scenario config).
LABELS: dict[str, tuple[str, ...]] = {
    "cards": CARD_FRAUDS,
    "vehicles": VEHICLE_FAULTS,
    "shipping": SHIPPING_FAULTS,
    "sensors": SENSOR_FAULTS,
}
