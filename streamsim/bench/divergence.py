"""Divergence: how many verdicts of N endpoint instances differ from one instance's, on the
same seeded card stream.

One seeded stream (the load test's payloads, `streamsim.loadtest.payloads`: ordinary use of
`cards` cards, so that cards come back, impossible travel and card testing bursts; event
times 1/`rate` apart from now) is sent, through the simulator's POS sink (`HttpEventSink`),
first to a single endpoint (`streamsim api --service fraud`), then to `streamsim api
--service fraud --instances N` addressed by each instance's own port
(`api.server.instance_port`), with card affinity (`token`: each card to one instance, by a
consistent hash of its token) or without (`none`: the instances in turn). Each run decides
into a topic of its own, the state starting empty. The verdicts are then compared per
transaction id: the decision, and the rules that fired (`evidence.alerts`).

Without affinity a card's next request may reach an instance that has not yet applied the
card's last decision from `cards.activity`: `handoffs` counts the requests whose card's
previous request went to another instance, and `follow_lag_ms` is each instance's own
measure of that state lag (publish to apply, `api.fraud.updater`). `handoff_gap_ms` is the
time from the card's previous answer to such a request's send (negative: it was queued behind
that answer): a handoff sooner than the follow lag may be judged on older state
(`handoffs_within_follow_lag_p99` counts those sooner than the worse instance's p99).

Requests leave at `rate` per second, `concurrency` at a time. With `concurrency` 1 a card's
requests are decided in the stream's order in every run, so the single instance's verdicts
are a fixed reference and any difference is the instances'. With more, a card's requests may
overtake each other (in one instance too).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx
import numpy as np
import orjson
import yaml

from api.server import instance_port
from core.config import StackConfig
from core.errors import StreamsimError
from core.kafka.admin import ensure_topics
from core.pan import PanTokenizer
from core.ports import free_port, port_in_use
from runs.commands import streamsim
from simulators.sinks.base import Records, Topics
from simulators.sinks.http import HttpEventSink, route, transaction_id
from simulators.sinks.memory import MemorySink
from streamsim.bench.api import ServerProcess, wait_ready
from streamsim.loadtest.config import PayloadMix
from streamsim.loadtest.payloads import build_payloads
from streamsim.stackfile import write_stack_file

PAN_SECRET = "divergence-pan-secret-0123456789abcdef"  # only for these private endpoints
TOKEN_HEX_CHARS = 32  # the endpoint's default `token_hex_chars`

Affinity = Literal["token", "none"]


@dataclass
class Verdicts:
    """One run's verdicts: transaction id -> (decision, the rules that fired), and where each
    request went."""

    by_id: dict[str, tuple[str | None, tuple[str, ...]]] = field(default_factory=dict)
    outcomes: Counter[str] = field(default_factory=Counter)
    instances: dict[str, int] = field(default_factory=dict)
    follow_lag_ms: list[dict[str, Any]] = field(default_factory=list)
    handoffs: int = 0
    handoff_gap_ms: list[float] = field(default_factory=list)


def card_stream(events: int, seed: int, cards: int, rate: float) -> list[bytes]:
    """The seeded request bodies (see the module docstring)."""
    times_s = np.arange(events, dtype=np.float64) / rate
    mix = PayloadMix(
        cards=cards, invalid_share=0.0, card_testing_share=0.05, impossible_travel_share=0.02
    )
    payloads = build_payloads(mix, times_s, seed)
    base_ms = time.time_ns() // 1_000_000
    return [
        payloads.body(i, f"div-{seed}-{i}", base_ms + round(t * 1000))
        for i, t in enumerate(times_s)
    ]


def card_tokens(bodies: list[bytes]) -> list[bytes]:
    """Each request's card token, as the endpoint computes it (the POS sink's record key)."""
    tokenizer = PanTokenizer(PAN_SECRET.encode(), TOKEN_HEX_CHARS)
    return [tokenizer.token(str(orjson.loads(b)["card_number"])).encode() for b in bodies]


def free_ports(host: str, n: int) -> int:
    """A port P with P and every instance port of `n` instances free."""
    for _ in range(50):
        port = free_port(host)
        wanted = [instance_port(port, i) for i in range(n)]
        if all(p < 65536 and not port_in_use(host, p) for p in wanted):
            return port
    raise StreamsimError(f"no free port with {n} free ports above it")


@contextlib.contextmanager
def endpoint(
    stack: StackConfig, home: Path, instances: int, name: str
) -> Iterator[tuple[list[str], str]]:
    """A private endpoint (1 process, or `--instances N`) deciding into a topic of its own;
    yields its POST URLs (the instances' own ports) and its base URLs' host:port prefix."""
    host = "127.0.0.1"
    port = free_ports(host, instances)
    api = stack.api.model_copy(update={"host": host, "port": port})
    private = stack.model_copy(update={"api": api})
    topic = f"divergence-{name}-{uuid.uuid4().hex[:8]}"
    ensure_topics(private, [topic])
    run_dir = home / name
    run_dir.mkdir(parents=True, exist_ok=True)
    stack_file = run_dir / "stack.yaml"
    env = write_stack_file(private, stack_file)
    env.update(STREAMSIM_PAN_SECRET=PAN_SECRET, PYTHONUNBUFFERED="1")
    settings_file = run_dir / "api.yaml"
    settings_file.write_text(
        yaml.safe_dump({"kind": "api", "topic": topic, "profiles_topic": None,
                        "rebuild_timeout_s": 60.0}),
        encoding="utf-8",
    )  # fmt: skip
    command = streamsim("api", "--config", str(stack_file), "--settings", str(settings_file),
                        "--no-access-log", "--service", "fraud")  # fmt: skip
    if instances > 1:
        command += ["--instances", str(instances)]
        bases = [f"http://{host}:{instance_port(port, i)}" for i in range(instances)]
    else:
        bases = [f"http://{host}:{port}"]
    server = ServerProcess(f"endpoint ({name})", command, run_dir / "endpoint.log",
                           {**os.environ, **env})  # fmt: skip
    try:
        wait_ready(server, lambda: all(_live(b) for b in bases))
        yield [f"{b}/v1/transactions" for b in bases], topic
    finally:
        server.stop()


def _follow_lag(url: str) -> dict[str, Any]:
    stats = httpx.get(url.replace("/v1/transactions", "/v1/stats"), timeout=5).json()
    return dict(stats["state"]["follow_lag_ms"])


def _live(base: str) -> bool:
    health = httpx.get(f"{base}/v1/health", timeout=2).json()
    return bool(health["state"]["status"] == "live")


def send(
    urls: list[str],
    tokens: list[bytes],
    bodies: list[bytes],
    *,
    affinity: Affinity,
    rate: float,
    concurrency: int,
) -> Verdicts:
    """Send the stream through the POS sink at `rate` per second; the verdicts."""
    sink = HttpEventSink(MemorySink(), urls, concurrency=concurrency, retries=2, affinity=affinity)
    sink.open(Topics(events="divergence", truth="divergence-truth"))
    started = time.monotonic()
    try:
        for i, (token, body) in enumerate(zip(tokens, bodies, strict=True)):
            delay = started + i / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            sink.write(Records(keys=[token], values=[body], timestamps=[0]), Records())
    finally:
        sink.close()
    out = Verdicts()
    answered = {}
    for value in sink.recorded.values:
        record = orjson.loads(value)
        txid = str(record["transaction_id"])
        answered[txid] = record
        out.outcomes[str(record["outcome"])] += 1
        rules = tuple(sorted({str(a["rule"]) for a in record["alerts"] or []}))
        out.by_id[txid] = (record["decision"], rules)
    stats = sink.stats()
    out.instances = dict(stats["instances"] or {urls[0]: stats["requests"]})
    # Handoffs: a card's request sent to another instance than its previous one.
    previous: dict[bytes, tuple[str, dict[str, Any] | None]] = {}
    turns = 0
    for token, body in zip(tokens, bodies, strict=True):
        if len(urls) == 1 or affinity == "token":
            url = route(token, urls)
        else:
            url = urls[turns % len(urls)]
            turns += 1
        record = answered.get(transaction_id(body) or "")
        before = previous.get(token)
        if before is not None and before[0] != url:
            out.handoffs += 1
            if before[1] is not None and record is not None:
                out.handoff_gap_ms.append(record["sent_at"] - before[1]["answered_at"])
        previous[token] = (url, record)
    return out


def compare(reference: Verdicts, other: Verdicts) -> dict[str, Any]:
    """Transactions whose decision, or whose fired rules, differ from the reference's."""
    decisions = rules = 0
    by_rule: Counter[str] = Counter()
    examples: list[dict[str, Any]] = []
    for txid, (decision, fired) in reference.by_id.items():
        theirs = other.by_id.get(txid)
        if theirs is None:
            continue
        if theirs[0] != decision:
            decisions += 1
            if len(examples) < 5:
                examples.append({"transaction_id": txid, "single": [decision, list(fired)],
                                 "instances": [theirs[0], list(theirs[1])]})  # fmt: skip
        if theirs[1] != fired:
            rules += 1
            for rule in set(fired) ^ set(theirs[1]):
                by_rule[rule] += 1
    return {
        "compared": sum(1 for t in reference.by_id if t in other.by_id),
        "decisions_differ": decisions,
        "rules_differ": rules,
        "rules_differ_by_rule": dict(sorted(by_rule.items())),
        "examples": examples,
    }


def _percentiles(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    ordered = sorted(values)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return {"p50": round(pick(0.5), 1), "min": round(ordered[0], 1), "max": round(ordered[-1], 1)}


def run_divergence(
    stack: StackConfig,
    *,
    events: int = 600,
    seed: int = 33,
    cards: int = 300,
    instances: int = 2,
    affinities: tuple[Affinity, ...] = ("token", "none"),
    rate: float = 200.0,
    concurrency: int = 1,
    home: Path | None = None,
) -> dict[str, Any]:
    """The single instance's verdicts, then `instances` instances' under each affinity, and
    the differences (see the module docstring). Needs a broker at `stack`'s bootstrap."""
    bodies = card_stream(events, seed, cards, rate)
    tokens = card_tokens(bodies)
    with contextlib.ExitStack() as stack_of:
        if home is None:
            home = Path(stack_of.enter_context(tempfile.TemporaryDirectory(prefix="divergence-")))
        with endpoint(stack, home, 1, "single") as (urls, _):
            single = send(urls, tokens, bodies, affinity="token", rate=rate,
                          concurrency=concurrency)  # fmt: skip
        runs: dict[str, Any] = {}
        for affinity in affinities:
            with endpoint(stack, home, instances, f"{instances}x-{affinity}") as (urls, _):
                verdicts = send(urls, tokens, bodies, affinity=affinity, rate=rate,
                                concurrency=concurrency)  # fmt: skip
                lags = [_follow_lag(u) for u in urls]
            worst = max((lag.get("p99", 0) for lag in lags), default=0)
            runs[affinity] = {
                **compare(single, verdicts),
                "outcomes": dict(verdicts.outcomes),
                "requests_per_instance": list(verdicts.instances.values()),
                "handoffs": verdicts.handoffs,
                "handoff_gap_ms": _percentiles(verdicts.handoff_gap_ms),
                "handoffs_within_follow_lag_p99": sum(
                    1 for gap in verdicts.handoff_gap_ms if gap < worst
                ),
                "follow_lag_ms": lags,
            }
    return {
        "events": events,
        "seed": seed,
        "instances": instances,
        "rate": rate,
        "concurrency": concurrency,
        "cards": len(set(tokens)),
        "card_population": cards,
        "single": {
            "outcomes": dict(single.outcomes),
            "decisions": dict(Counter(d for d, _ in single.by_id.values())),
        },
        "affinity": runs,
    }
