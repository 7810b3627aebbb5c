"""The fraud service: state, decider, publisher, updater and counters, started and stopped
with the app (see `api.main`). `answer` is what routes await: the verdict once it is as
durable as `settings.durability` asks (`api.fraud.durability`); `handle` decides and
publishes without waiting (the evaluation suite, unit tests)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from api.fraud.compromised import CompromisedCards, CompromisedUpdater
from api.fraud.decision import Decider, wall_clock_ms
from api.fraud.durability import AckWaiter, NotDurable, WriteAheadLog, wal_directory
from api.fraud.models import TransactionRequest
from api.fraud.profiles import ProfileStore, ProfileUpdater
from api.fraud.publisher import (
    ACK_LINGER_MS,
    LINGER_MS,
    KafkaPublisher,
    MemoryPublisher,
    OnAcked,
    Publisher,
)
from api.fraud.settings import ApiSecrets, ApiSettings
from api.fraud.state import LastUseState
from api.fraud.stats import RequestStats
from api.fraud.updater import ActivityUpdater
from api.fraud.verdict import response_body
from core.config import StackConfig
from core.pan import PanTokenizer

log = logging.getLogger("api.service")


class FraudService:
    """With `stack`: publishes to and rebuilds from Kafka. Without: in memory only (tests)."""

    def __init__(
        self,
        settings: ApiSettings,
        secrets: ApiSecrets,
        stack: StackConfig | None = None,
        *,
        publisher: Publisher | None = None,
        clock: Callable[[], int] = wall_clock_ms,
        instance: int | None = None,
    ) -> None:
        self.settings = settings
        self.secrets = secrets
        self.stack = stack
        self.state = LastUseState(settings, clock)
        self.tokenizer = PanTokenizer(secrets.pan_secret, settings.token_hex_chars)
        self.updater = (
            ActivityUpdater(stack, settings.topic, self.state, settings.rebuild_lookback_s)
            if stack
            else None
        )
        self.profiles = ProfileStore()
        self.profile_updater = (
            ProfileUpdater(stack, settings.profiles_topic, self.profiles)
            if stack and settings.profiles_topic
            else None
        )
        params = settings.compromised_cards
        self.compromised = None if params is None else CompromisedCards(params)
        self.compromised_updater = (
            CompromisedUpdater(
                stack,
                settings.compromised_cards_topic,
                self.compromised,
                settings.rebuild_lookback_s,
            )
            if stack and self.compromised is not None and settings.compromised_cards_topic
            else None
        )
        #: Durability needs a broker: without a stack, `none`.
        self.durability = settings.durability if stack is not None else "none"
        if publisher is None:
            publisher = (
                KafkaPublisher(
                    stack,
                    settings.topic,
                    reports=self.durability != "none",
                    linger_ms=ACK_LINGER_MS if self.durability == "ack" else LINGER_MS,
                )
                if stack
                else MemoryPublisher()
            )
        self.publisher = publisher
        self.wal: WriteAheadLog | None = None
        if self.durability == "log" and stack is not None:
            directory = settings.wal_dir or wal_directory(stack.dirs.data, stack.api.port, instance)
            self.wal = WriteAheadLog(Path(directory), fsync=settings.wal_fsync)
        self._acks: AckWaiter | None = None
        #: transaction_id -> the future of its record's acknowledgement (`ack`), until resolved.
        self._pending: dict[str, asyncio.Future[str | None]] = {}
        #: transaction_id -> (key, record) the broker refused (`ack`): a retry publishes it
        #: again before its cached verdict is answered 200.
        self._refused: dict[str, tuple[str, bytes]] = {}
        self.decider = Decider(
            settings,
            self.tokenizer,
            self.state,
            clock,
            self.rebuilt,
            self.profiles,
            self.compromised,
        )
        self.stats = RequestStats()
        self._gc_task: asyncio.Task[None] | None = None

    def rebuilt(self) -> bool:
        return (self.updater is None or self.updater.rebuilt.is_set()) and (
            self.profile_updater is None or self.profile_updater.rebuilt.is_set()
        )

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        if self.durability == "ack":
            interval = self.settings.ack_poll_interval_ms
            if interval is None:  # a poll thread hands the reports over
                self._acks = AckWaiter(loop, timeout_s=self.settings.ack_timeout_s)
                if isinstance(self.publisher, KafkaPublisher):
                    self.publisher.after_poll = self._acks.hand_over
                self.publisher.start(loop, thread=True)
            else:  # the loop polls while requests wait
                self._acks = AckWaiter(
                    loop, self.publisher.poll_now, interval / 1000, self.settings.ack_timeout_s
                )
                self.publisher.start(loop)
        else:
            self.publisher.start(loop)
        if self.profile_updater is not None:
            self.profile_updater.start()
        if self.compromised_updater is not None:
            self.compromised_updater.start()  # not waited for: filters apply as they arrive
        if self.updater is not None:
            self.updater.start()
            timeout = self.settings.rebuild_timeout_s
            done = await asyncio.to_thread(self.updater.rebuilt.wait, timeout)
            if self.profile_updater is not None:
                done = done and await asyncio.to_thread(self.profile_updater.rebuilt.wait, timeout)
            if not done:
                log.warning(
                    "state rebuild from %s not finished after %.0f s; serving anyway "
                    "(responses say state_incomplete until it is)",
                    self.settings.topic,
                    timeout,
                )
        if self.wal is not None and self.wal.leftover:
            await self._replay_wal()
        interval = self.settings.gc_freeze_interval_s
        if interval is not None:
            gc.collect()
            gc.freeze()
            self._gc_task = asyncio.create_task(self._freeze_every(interval))

    async def _freeze_every(self, interval_s: float) -> None:
        while True:
            await asyncio.sleep(interval_s)
            gc.collect(1)  # young generations only: well under a millisecond
            gc.freeze()

    async def stop(self) -> None:
        if self._gc_task is not None:
            self._gc_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._gc_task
            gc.unfreeze()
        if self.updater is not None:
            await asyncio.to_thread(self.updater.stop)
        if self.profile_updater is not None:
            await asyncio.to_thread(self.profile_updater.stop)
        if self.compromised_updater is not None:
            await asyncio.to_thread(self.compromised_updater.stop)
        left = await asyncio.to_thread(self.publisher.close, self.settings.flush_timeout_s)
        log.info("publisher flushed (%d records left undelivered)", left)
        if self.wal is not None:
            kept = self.wal.close()
            if kept:
                log.error("%d records kept in the write-ahead log, replayed at next start", kept)

    async def _replay_wal(self) -> None:
        """Publish what the write-ahead log of a previous process holds and the rebuilt state
        does not know (it reached the topic otherwise); delete it once acknowledged."""
        assert self.wal is not None
        records = []
        for line in self.wal.leftover_records():
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError:
                log.warning("skipping a torn write-ahead record")
                continue
            if not self.state.knows(str(record["transaction_id"])):
                records.append(record)
        failed: list[str] = []

        def on_acked(error: str | None) -> None:
            if error is not None:
                failed.append(error)

        with self.state.lock:
            for record in records:
                self.state.apply(record, response_body(record))
        for record in records:
            self.publisher.publish(
                record["card_token"], orjson.dumps(record), record["transaction_id"], on_acked
            )
        left = await asyncio.to_thread(self.publisher.flush, self.settings.flush_timeout_s)
        if left or failed:
            log.error(
                "write-ahead replay: %d records not acknowledged (%s); kept for the next start",
                left + len(failed),
                failed[:1],
            )
            return
        self.wal.drop_leftover()
        log.info(
            "write-ahead replay: %d records published to %s", len(records), self.settings.topic
        )

    def handle(self, tx: TransactionRequest) -> bytes:
        """Decide (or replay) and publish, without waiting for durability; the response body."""
        return self._decide(tx)[0]

    async def answer(self, tx: TransactionRequest) -> bytes:
        """The response body once the decision is as durable as `durability` asks; raises
        `NotDurable` when it cannot be (the route answers 503)."""
        body, pending = self._decide(tx)
        if pending is not None:
            await pending
        return body

    def _decide(self, tx: TransactionRequest) -> tuple[bytes, Any]:
        """The body and what to await before answering it (None: nothing)."""
        body, record = self.decider.decide(tx)
        if record is None:
            self.stats.replays += 1
            refused = self._refused.pop(tx.transaction_id, None)
            if refused is not None:  # a retry of one the broker refused: publish it again
                return body, self._published(tx.transaction_id, *refused)
            ack = self._pending.get(tx.transaction_id)  # a retry of an unacknowledged one
            return body, (None if ack is None else self._acked(ack))
        value = orjson.dumps(record)
        self.stats.decisions[record["decision"]] += 1
        if self._acks is not None:
            return body, self._published(tx.transaction_id, record["card_token"], value)
        if self.wal is not None:
            logged: OnAcked = self.wal.append(value)
            self.publisher.publish(record["card_token"], value, tx.transaction_id, logged)
            return body, (self.wal.synced() if self.wal.fsync else None)
        self.publisher.publish(record["card_token"], value, tx.transaction_id)
        return body, None

    def _published(self, transaction_id: str, key: str, value: bytes) -> Any:
        """Publish a record under `ack`, watched; what to await before answering."""
        assert self._acks is not None
        future, on_acked = self._acks.waiter()
        self._watch(transaction_id, future, key, value)
        self.publisher.publish(key, value, transaction_id, on_acked)
        return self._acked(future)

    def _watch(
        self, transaction_id: str, future: asyncio.Future[str | None], key: str, value: bytes
    ) -> None:
        """Track the record's acknowledgement; one the broker refused is kept for a retry
        (its cached verdict is never answered 200 while the record is not in the topic), as
        many as the verdict cache holds (`idempotency.max_entries`; past it, the oldest verdicts
        are forgotten too, and their retries decide again)."""
        pending, refused = self._pending, self._refused
        cap = self.settings.idempotency.max_entries

        def done(acked: asyncio.Future[str | None]) -> None:
            pending.pop(transaction_id, None)
            if acked.cancelled() or acked.result() is not None:
                refused[transaction_id] = (key, value)
                while len(refused) > cap:  # a broker down for long: memory stays bounded
                    refused.pop(next(iter(refused)))

        future.add_done_callback(done)
        pending[transaction_id] = future

    async def _acked(self, future: asyncio.Future[str | None]) -> None:
        assert self._acks is not None
        try:
            error = await self._acks.follow(future)  # a retry may follow it as well
        except TimeoutError:
            raise NotDurable(
                f"not acknowledged by the broker within {self.settings.ack_timeout_s:g} s"
            ) from None
        if error is not None:
            raise NotDurable(f"not acknowledged by the broker: {error}")

    def state_stats(self) -> dict[str, Any]:
        updater = self.updater
        with self.state.lock:
            cards, verdicts = len(self.state.cards), len(self.state.verdicts)
        return {
            "status": "disabled" if updater is None else updater.status,
            "cards": cards,
            "verdicts": verdicts,
            "applied_from_topic": 0 if updater is None else updater.applied,
            "malformed_records": 0 if updater is None else updater.malformed,
            "follow_lag_ms": {"count": 0} if updater is None else updater.follow_lag(),
        }
