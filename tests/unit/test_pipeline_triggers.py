"""Which trigger each cards query can run with."""

from __future__ import annotations

from pipeline.settings import TriggerSettings
from pipeline.triggers import output_mode, query_trigger, realtime_fits

REALTIME = TriggerSettings(mode="realtime", interval="5 seconds")


def test_stateful_queries_fall_back_to_microbatches() -> None:
    assert query_trigger(REALTIME, stateful=True).mode == "microbatch"
    assert query_trigger(REALTIME, stateful=False) == REALTIME
    available_now = TriggerSettings(mode="available_now")
    assert query_trigger(available_now, stateful=True) == available_now


def test_realtime_needs_a_slot_per_partition_and_one_to_spare() -> None:
    assert realtime_fits(REALTIME, partitions=1, slots=2) == (REALTIME, None)
    assert realtime_fits(REALTIME, partitions=3, slots=4) == (REALTIME, None)
    trigger, note = realtime_fits(REALTIME, partitions=2, slots=2)
    assert (trigger.mode, trigger.interval) == ("microbatch", "5 seconds")  # not back to back
    assert note == "Real-time Mode would hold 2 of 2 task slots, leaving the others none"
    micro = TriggerSettings(mode="microbatch")
    assert realtime_fits(micro, partitions=8, slots=2) == (micro, None)


def test_realtime_writes_in_update_mode() -> None:
    assert output_mode(REALTIME) == "update"
    assert output_mode(TriggerSettings()) == "append"
