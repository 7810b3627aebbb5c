"""The fraud service: state, decider, publisher, updater and counters, started and stopped
with the app (see `api.main`)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import Callable
from typing import Any

import orjson

from api.fraud.decision import Decider, wall_clock_ms
from api.fraud.models import TransactionRequest
from api.fraud.profiles import ProfileStore, ProfileUpdater
from api.fraud.publisher import KafkaPublisher, MemoryPublisher, Publisher
from api.fraud.settings import ApiSecrets, ApiSettings
from api.fraud.state import LastUseState
from api.fraud.stats import RequestStats
from api.fraud.updater import ActivityUpdater
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
        if publisher is None:
            publisher = KafkaPublisher(stack, settings.topic) if stack else MemoryPublisher()
        self.publisher = publisher
        self.decider = Decider(
            settings, self.tokenizer, self.state, clock, self.rebuilt, self.profiles
        )
        self.stats = RequestStats()
        self._gc_task: asyncio.Task[None] | None = None

    def rebuilt(self) -> bool:
        return (self.updater is None or self.updater.rebuilt.is_set()) and (
            self.profile_updater is None or self.profile_updater.rebuilt.is_set()
        )

    async def start(self) -> None:
        self.publisher.start(asyncio.get_running_loop())
        if self.profile_updater is not None:
            self.profile_updater.start()
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
        left = await asyncio.to_thread(self.publisher.close, self.settings.flush_timeout_s)
        log.info("publisher flushed (%d records left undelivered)", left)

    def handle(self, tx: TransactionRequest) -> bytes:
        """Decide (or replay) and publish; the response body."""
        body, record = self.decider.decide(tx)
        if record is None:
            self.stats.replays += 1
            return body
        self.publisher.publish(record["card_token"], orjson.dumps(record), tx.transaction_id)
        self.stats.decisions[record["decision"]] += 1
        return body

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
        }
