"""Alert ids of a faulted job run counted against an uninterrupted run of the same input.

Alert ids are deterministic (rule, entity, evidence), so the uninterrupted run's ids are the
expected set; the faulted run's alerts topic and Parquet lake must each hold every one of
them exactly once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class AlertTally:
    expected: int  # distinct alert ids of the uninterrupted run
    lost: int  # expected ids missing from the topic, plus those missing from the lake
    duplicate_ids: int  # ids written more than once to the topic, plus those in the lake
    extra_copies: int  # copies beyond the first, topic and lake together
    unexpected: int  # ids the uninterrupted run did not raise (topic or lake)


def tally_alerts(reference: Iterable[str], topic: Iterable[str], lake: Iterable[str]) -> AlertTally:
    """Count loss and duplication of the faulted run's `topic` and `lake` alert ids.

    >>> tally_alerts(["a", "b"], ["a", "a", "c"], ["a", "b"])
    AlertTally(expected=2, lost=1, duplicate_ids=1, extra_copies=1, unexpected=1)
    """
    expected = set(reference)
    lost = duplicate_ids = extra = 0
    seen: set[str] = set()
    for ids in (Counter(topic), Counter(lake)):
        lost += len(expected - set(ids))
        duplicate_ids += sum(1 for n in ids.values() if n > 1)
        extra += sum(n - 1 for n in ids.values())
        seen |= set(ids)
    return AlertTally(len(expected), lost, duplicate_ids, extra, len(seen - expected))
