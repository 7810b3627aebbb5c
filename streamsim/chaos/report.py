"""The result of one chaos run; `to_json` is the `chaos --json` contract; `outcome` decides
the exit status and the closing line."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

#: Exit statuses of `streamsim chaos` (typer's usage errors exit 2).
EXIT_OK = 0
EXIT_FAILED = 1  # something was lost or duplicated, or a check of the run failed
EXIT_NOT_INJECTED = 3  # the fault never landed, or there was nothing to check: nothing proven


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
    #: Why the fault did not land mid-run, or there was nothing to check (None: it did and
    #: there was). Not part of the JSON: `ok` is false and the exit status says it.
    not_injected: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "fault": self.fault,
            "sent": self.sent,
            "lost": self.lost,
            "unexpected_duplicates": self.unexpected_duplicates,
            "duplicate_alert_ids": self.duplicate_alert_ids,
            "recovery_s": None if math.isnan(self.recovery_s) else round(self.recovery_s, 3),
            "ok": self.ok,
        }


def outcome(report: ChaosReport) -> tuple[int, str | None]:
    """The exit status and the error line (None when ok).

    An ok run exits 0 (`ok` is each fault's own verdict: the endpoint's may count decisions
    lost within the publish linger). A loss or duplicate that was counted fails the run (1),
    injected or not; a fault that never
    landed (or left nothing to compare) exits 3 and says so, never claiming a loss it did not
    count; any other failed check (no recovery, a missing warning) exits 1 as such.

    >>> r = ChaosReport("cards", "driver", 10, 0, 0, 0, float("nan"), False, not_injected="x")
    >>> outcome(r)
    (3, 'the driver fault was not injected: x; nothing was lost, nothing was proven')
    """
    if report.ok:  # the endpoint's losses inside the publish linger's window are allowed
        return EXIT_OK, None
    seen = report.lost + report.unexpected_duplicates + report.duplicate_alert_ids
    if seen:
        counted = (
            f"{report.lost} lost, {report.unexpected_duplicates} unexpected duplicates, "
            f"{report.duplicate_alert_ids} duplicate alert ids"
        )
        if report.not_injected is not None:
            return EXIT_FAILED, (
                f"records were lost or duplicated ({counted}) although the {report.fault} "
                f"fault was not injected ({report.not_injected}; see above)"
            )
        return EXIT_FAILED, f"the {report.fault} fault lost or duplicated records ({counted})"
    if report.not_injected is not None:
        return EXIT_NOT_INJECTED, (
            f"the {report.fault} fault was not injected: {report.not_injected}; "
            "nothing was lost, nothing was proven"
        )
    return EXIT_FAILED, (
        f"the {report.fault} fault lost and duplicated nothing, but a check of the run "
        "failed (see above)"
    )
