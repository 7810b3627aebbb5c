"""Decisions the endpoint acknowledged (HTTP 200) counted against `cards.activity`.

A decision is published asynchronously: it lingers in the producer up to
`api.fraud.publisher.LINGER_MS` before it is sent, and the answer does not wait for it. A
kill -9 therefore loses the decisions answered in the last linger (plus the broker round trip)
before the kill. `tally_acks` measures that: which acknowledged decisions are missing, and how
long before the kill each was answered.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Answer:
    transaction_id: str
    body: bytes  # the 200 response, byte for byte
    answered_at: float  # time.monotonic() when the response arrived


@dataclass(frozen=True)
class AckTally:
    acknowledged: int  # 200 answers before the kill
    lost: int  # of those, missing from the topic after the kill
    lost_max_age_s: float  # the longest a lost decision had been answered before the kill (0: none)
    replayed: int  # acknowledged decisions in the topic that were sent again after the restart
    replay_mismatches: int  # of those, answers that differ from the first one


def tally_acks(
    answers: Iterable[Answer],
    in_topic: Collection[str],
    killed_at: float,
    replays: Mapping[str, bytes],
) -> AckTally:
    """Acknowledged decisions missing from `in_topic` (the topic as the killed endpoint left
    it), their age at the kill, and replay answers (`replays`, by id) that differ.

    >>> a = [Answer("t1", b"x", 1.0), Answer("t2", b"y", 9.9)]
    >>> tally_acks(a, {"t1"}, 10.0, {"t1": b"x", "t2": b"z"})
    AckTally(acknowledged=2, lost=1, lost_max_age_s=0.1, replayed=1, replay_mismatches=0)
    """
    acked = list(answers)
    lost = [a for a in acked if a.transaction_id not in in_topic]
    kept = [a for a in acked if a.transaction_id in in_topic and a.transaction_id in replays]
    return AckTally(
        acknowledged=len(acked),
        lost=len(lost),
        lost_max_age_s=round(max((killed_at - a.answered_at for a in lost), default=0.0), 6),
        replayed=len(kept),
        replay_mismatches=sum(1 for a in kept if replays[a.transaction_id] != a.body),
    )
