"""The pure parts of `streamsim chaos --fault driver|endpoint`: reading a Spark checkpoint's
batches, counting alert ids against an uninterrupted run, counting acknowledged decisions
against the topic, and the CLI's checks before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from core.errors import StreamsimError
from streamsim.chaos.acks import Answer, tally_acks
from streamsim.chaos.alerts import tally_alerts
from streamsim.chaos.checkpoint import BatchState, batch_state, covers, source_offsets
from streamsim.chaos.ledger import Ledger, tally
from streamsim.cli import app

CLI = CliRunner(env={"COLUMNS": "240"})  # error panels on one line


def write_batch(checkpoint: Path, folder: str, batch: int, *sources: str) -> None:
    path = checkpoint / folder / str(batch)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(["v1", '{"batchWatermarkMs":0}', *sources]))
    (checkpoint / folder / f".{batch}.crc").write_bytes(b"crc")  # Spark's checksums: ignored


def test_batch_state_finds_the_running_batch_after_a_commit(tmp_path: Path) -> None:
    assert batch_state(tmp_path) == BatchState(None, None)
    assert not batch_state(tmp_path).mid_batch
    write_batch(tmp_path, "offsets", 0, '{"t":{"0":5}}')
    state = batch_state(tmp_path)
    assert state.running == 0 and not state.mid_batch  # the first batch: nothing done yet
    write_batch(tmp_path, "commits", 0)
    assert batch_state(tmp_path).running is None and not batch_state(tmp_path).mid_batch
    for batch in (1, 10):  # numeric order, not by name
        write_batch(tmp_path, "offsets", batch, '{"t":{"0":9}}')
    state = batch_state(tmp_path)
    assert state == BatchState(planned=10, committed=0)
    assert state.running == 10 and state.mid_batch


def test_source_offsets_and_covers(tmp_path: Path) -> None:
    write_batch(tmp_path, "offsets", 3, '{"t":{"0":5,"1":7}}', '{"u":{"0":1}}')
    read = source_offsets(tmp_path, 3)
    assert read == {"t": {0: 5, 1: 7}, "u": {0: 1}}
    assert covers(read, "t", {0: 5, 1: 7, 2: 0})  # an empty partition needs nothing
    assert not covers(read, "t", {0: 5, 1: 8})
    assert not covers(read, "t", {0: 5, 1: 7, 2: 1})  # a partition not read yet
    assert not covers(read, "v", {0: 1})


def test_tally_alerts_counts_each_sink_on_its_own() -> None:
    clean = tally_alerts(["a", "b"], ["b", "a"], ["a", "b"])
    assert (clean.expected, clean.lost, clean.duplicate_ids, clean.unexpected) == (2, 0, 0, 0)
    # "b" missing from the lake only, "a" twice in the topic and three times in the lake
    bad = tally_alerts(["a", "b"], ["a", "a", "b"], ["a", "a", "a"])
    assert bad.lost == 1
    assert bad.duplicate_ids == 2
    assert bad.extra_copies == 3
    assert tally_alerts(["a"], ["a", "z"], ["a"]).unexpected == 1


def test_tally_acks_measures_the_loss_window_and_replays() -> None:
    answers = [Answer("t1", b"A", 1.0), Answer("t2", b"B", 9.75), Answer("t3", b"C", 9.9)]
    tally = tally_acks(answers, {"t1", "t3"}, 10.0, {"t1": b"A", "t3": b"changed"})
    assert tally.acknowledged == 3
    assert tally.lost == 1 and tally.lost_max_age_s == pytest.approx(0.25)
    assert tally.replayed == 2 and tally.replay_mismatches == 1
    none_lost = tally_acks(answers, {"t1", "t2", "t3"}, 10.0, {})
    assert none_lost.lost == 0 and none_lost.lost_max_age_s == 0.0 and none_lost.replayed == 0


def test_tally_counts_each_send_once_and_finds_loss_and_duplicates() -> None:
    def truth(
        event_id: str, tag: int | None, **more: object
    ) -> tuple[dict[str, object], bytes | None]:
        record = {"event_id": event_id, "duplicate_of": None, "dropped": None, **more}
        return record, None if tag is None else tag.to_bytes(8, "big")

    def event(event_id: str, tag: int | None) -> tuple[dict[str, object], bytes | None]:
        return {"event_id": event_id}, None if tag is None else tag.to_bytes(8, "big")

    records = [
        truth("r-1", 1),
        truth("r-1", 2, duplicate_of="r-1"),  # a retry by design: expected twice
        truth("r-2", 3),
        truth("r-2", 3),  # the producer resent this truth record: counted once
        truth("r-3", 4, dropped="network"),  # never sent
        truth("r-4", 5),
        truth("r-5", None),
        truth("other-9", 6),  # another run's
    ]
    events = [
        event("r-1", 11),
        event("r-1", 12),  # the duplicate by design
        event("r-2", 13),
        event("r-2", 13),  # the producer resent it: one send
        event("r-2", 14),  # a second send truth does not know: an unexpected duplicate
        event("r-5", None),
        event("r-5", None),  # untagged copies each count
        event("other-9", 15),
    ]
    assert tally(records, events, "r-") == Ledger(
        expected=5,
        found=6,
        lost=1,
        unexpected_duplicates=2,
        truth_records=6,
        truth_resent=1,
        events_resent=1,
    )


def test_cli_rejects_an_unknown_fault_and_a_non_card_scenario_for_driver_faults() -> None:
    unknown = CLI.invoke(app, ["chaos", "cards", "--fault", "disk"])
    assert unknown.exit_code == 2
    assert "one of broker, broker-of-3, driver, endpoint" in unknown.output
    for fault in ("driver", "endpoint"):
        wrong = CLI.invoke(app, ["chaos", "sensors", "--fault", fault])
        assert isinstance(wrong.exception, StreamsimError)  # before any broker or process starts
        assert "needs a cards scenario with domain.delivery: kafka" in str(wrong.exception)
