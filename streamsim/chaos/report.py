"""The result of one chaos run; `to_json` is the `chaos --json` contract."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ChaosReport:
    scenario: str
    fault: str
    sent: int  # event records the simulator handed to the producer (duplicates included)
    lost: int  # delivery attempts truth says were sent whose event is not in the topic
    unexpected_duplicates: int  # copies in the topic beyond those truth says were sent
    duplicate_alert_ids: int  # alert ids written more than once (0 where no job runs)
    recovery_s: float  # from the kill until an acks=all write succeeds again
    ok: bool
    notes: list[str] = field(default_factory=list)  # human detail, not part of the JSON

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "fault": self.fault,
            "sent": self.sent,
            "lost": self.lost,
            "unexpected_duplicates": self.unexpected_duplicates,
            "duplicate_alert_ids": self.duplicate_alert_ids,
            "recovery_s": round(self.recovery_s, 3),
            "ok": self.ok,
        }
