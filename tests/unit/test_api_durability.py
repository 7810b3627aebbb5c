"""The fraud endpoint's durability parts (write-ahead log, ack hand-over) and load shedder."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import orjson

from api.fraud.durability import SUFFIX, AckWaiter, NotDurable, WriteAheadLog
from api.fraud.models import TransactionRequest
from api.fraud.publisher import MemoryPublisher
from api.fraud.service import FraudService
from api.fraud.settings import ApiSecrets, ApiSettings
from api.fraud.shedding import LoadShedder
from api.fraud.stats import TRANSACTIONS_PATH, RequestStats
from core.config import StackConfig
from tests.unit.test_api_decisions import tx


def test_a_segment_is_deleted_once_closed_and_every_record_acknowledged(tmp_path: Path) -> None:
    wal = WriteAheadLog(tmp_path, fsync=False, segment_records=3)
    callbacks = [wal.append(b'{"n":%d}' % i) for i in range(7)]
    assert len(list(tmp_path.glob(f"*{SUFFIX}"))) == 3  # 3 + 3 + the open one
    for callback in callbacks[:3]:
        callback(None)
    wal.collect()
    assert len(list(tmp_path.glob(f"*{SUFFIX}"))) == 2
    callbacks[3]("broker down")  # a failed record keeps its segment for the next start
    for callback in callbacks[4:]:
        callback(None)
    assert wal.close() == 1
    left = WriteAheadLog(tmp_path, fsync=False)
    assert [orjson.loads(r)["n"] for r in left.leftover_records()] == [3, 4, 5]
    left.drop_leftover()
    left.close()
    assert list(tmp_path.glob(f"*{SUFFIX}")) == []


def test_leftovers_skip_blank_lines_and_stay_in_order(tmp_path: Path) -> None:
    (tmp_path / f"{1:020d}{SUFFIX}").write_bytes(b'{"n":1}\n\n{"n":2}\n')
    (tmp_path / f"{2:020d}{SUFFIX}").write_bytes(b'{"n":3}\n{"n":')  # torn by a kill
    wal = WriteAheadLog(tmp_path, fsync=False)
    assert list(wal.leftover_records()) == [b'{"n":1}', b'{"n":2}', b'{"n":3}', b'{"n":']
    wal.close()


def test_group_commit_covers_every_append_before_it(tmp_path: Path) -> None:
    wal = WriteAheadLog(tmp_path, fsync=True)

    async def run() -> int:
        for i in range(5):
            wal.append(b'{"n":%d}' % i)
        await asyncio.gather(*(wal.synced() for _ in range(5)))
        wal.append(b'{"n":5}')
        await wal.synced()
        return wal._synced

    assert asyncio.run(run()) == 6
    assert wal.close() == 6  # written, none acknowledged: all kept


def test_acks_from_another_thread_resolve_futures_on_the_loop() -> None:
    async def run() -> list[str | None]:
        waiter = AckWaiter(asyncio.get_running_loop())
        pairs = [waiter.waiter() for _ in range(3)]

        def poll_thread() -> None:
            pairs[0][1](None)
            pairs[1][1]("timed out")
            waiter.hand_over()
            pairs[2][1](None)
            waiter.hand_over()

        thread = threading.Thread(target=poll_thread)
        thread.start()
        results = await asyncio.wait_for(asyncio.gather(*(f for f, _ in pairs)), 10)
        thread.join()
        return list(results)

    assert asyncio.run(run()) == [None, "timed out", None]


def test_a_request_times_out_alone_and_its_retry_still_gets_the_acknowledgement() -> None:
    async def run() -> tuple[bool, str | None, bool]:
        waiter = AckWaiter(asyncio.get_running_loop(), timeout_s=0.05)
        acked, on_acked = waiter.waiter()
        first = waiter.follow(acked)
        try:
            await first
            timed_out = False
        except TimeoutError:
            timed_out = True
        retry = waiter.follow(acked)
        cancelled = waiter.follow(acked)
        cancelled.cancel()  # a request cancelled while it waits
        on_acked(None)
        waiter.hand_over()
        result = await asyncio.wait_for(retry, 10)
        await asyncio.sleep(0.2)  # past the sweep: nothing left to time out
        return timed_out, result, not waiter._deadlines and not acked.cancelled()

    assert asyncio.run(run()) == (True, None, True)


def test_past_the_bound_a_transaction_is_shed_with_429_and_retry_after() -> None:
    release = asyncio.Event()
    entered = 0

    async def app(scope: Any, receive: Any, send: Any) -> None:
        nonlocal entered
        entered += 1
        await release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    stats = RequestStats()
    shedder = LoadShedder(app, stats, limit=2, retry_after_s=3)

    async def request(sent: list[dict[str, Any]], path: str = TRANSACTIONS_PATH) -> None:
        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"{}"}

        async def send(message: Any) -> None:
            sent.append(message)

        scope = {"type": "http", "path": path, "method": "POST", "headers": []}
        await shedder(scope, receive, send)

    async def run() -> list[list[dict[str, Any]]]:
        sent: list[list[dict[str, Any]]] = [[] for _ in range(4)]
        held = [asyncio.create_task(request(sent[i])) for i in range(2)]
        await asyncio.sleep(0)
        await request(sent[2])  # the third while two are held: shed at once
        other = asyncio.create_task(request(sent[3], "/v1/stats"))  # other paths: never shed
        await asyncio.sleep(0)
        assert shedder.in_flight == 2 and entered == 3
        release.set()
        await asyncio.gather(*held, other)
        assert shedder.in_flight == 0
        return sent

    sent = asyncio.run(run())
    assert [s[0]["status"] for s in sent] == [200, 200, 429, 200]
    headers = dict(sent[2][0]["headers"])
    assert headers[b"retry-after"] == b"3"
    assert orjson.loads(sent[2][1]["body"])["detail"].startswith("overloaded: 2 transactions")
    assert stats.shed == 1


def test_acks_polled_from_the_loop_resolve_while_requests_wait() -> None:
    async def run() -> tuple[list[str | None], int, bool]:
        callbacks: list[Any] = []
        polls = 0

        def poll() -> None:  # what producer.poll(0) does: run the ready callbacks
            nonlocal polls
            polls += 1
            if polls == 3:
                for callback, error in callbacks:
                    callback(error)

        waiter = AckWaiter(asyncio.get_running_loop(), poll, interval_s=0.001)
        pairs = [waiter.waiter() for _ in range(2)]
        callbacks.extend([(pairs[0][1], None), (pairs[1][1], "broker down")])
        results = await asyncio.wait_for(asyncio.gather(*(f for f, _ in pairs)), 10)
        await asyncio.sleep(0.01)
        return list(results), polls, waiter._ticking

    results, polls, ticking = asyncio.run(run())
    assert results == [None, "broker down"]
    assert polls == 3 and not ticking  # polled only while a request waited


class RefusingOnce(MemoryPublisher):
    """Refuses the first delivery of each transaction, as a broker that gives up would."""

    def __init__(self) -> None:
        super().__init__()
        self.reports: list[tuple[Any, str | None]] = []
        self.tries: dict[str, int] = {}

    def publish(self, key: str, value: bytes, transaction_id: str, on_acked: Any = None) -> None:
        self.tries[transaction_id] = self.tries.get(transaction_id, 0) + 1
        refused = self.tries[transaction_id] == 1
        if not refused:
            self.records.append((key, value))
        self.reports.append((on_acked, "Local: Message timed out" if refused else None))

    def poll_now(self) -> None:
        reports, self.reports = self.reports, []
        for on_acked, error in reports:
            on_acked(error)


def refusing_service(**settings: Any) -> tuple[FraudService, RefusingOnce]:
    publisher = RefusingOnce()
    service = FraudService(
        ApiSettings(gc_freeze_interval_s=None, **settings),
        ApiSecrets(b"unit-test-secret-0123456789", None),
        StackConfig(),
        publisher=publisher,
    )
    return service, publisher


def answers(service: FraudService, publisher: RefusingOnce, txids: list[str]) -> list[str]:
    """Each transaction answered in turn (a repeated id is the terminal's retry)."""

    async def answered(txid: str) -> str:
        try:
            await service.answer(TransactionRequest.model_validate(tx(txid, 1_700_000_000_000)))
            return "200"
        except NotDurable:
            return "503"

    async def run() -> list[str]:
        loop = asyncio.get_running_loop()
        service._acks = AckWaiter(loop, publisher.poll_now, 0.001, 5.0)  # as start() sets it
        return [await answered(txid) for txid in txids]

    return asyncio.run(run())


def test_a_refused_record_is_published_again_before_its_retry_gets_200() -> None:
    service, publisher = refusing_service()
    assert answers(service, publisher, ["refused-1", "refused-1"]) == ["503", "200"]
    assert publisher.tries == {"refused-1": 2}
    assert [orjson.loads(v)["transaction_id"] for _, v in publisher.records] == ["refused-1"]


def test_refused_records_are_kept_as_long_as_their_verdicts() -> None:
    service, publisher = refusing_service(idempotency={"max_entries": 1})
    assert answers(service, publisher, ["refused-1", "refused-2"]) == ["503", "503"]
    assert list(service._refused) == ["refused-2"]  # the verdict cache forgot refused-1 too
    assert answers(service, publisher, ["refused-1"]) == ["200"]  # decided and sent again
    assert publisher.tries == {"refused-1": 2, "refused-2": 1}
