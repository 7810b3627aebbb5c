"""The compromised cards' Bloom filters measured against truth (issue 35 part 3 and 5).

`bloom_block(spark, events, settings)`: the `bloom` entry of `evaluate`'s `sketches` block.
The filters are built as the cards job builds them (`pipeline.jobs.cards.bloom`, Spark's
`bloom_filter_agg`) over the run's transactions, each event id once; exact membership comes
from the same events (the cards seen at the terminal in the window). `observed_error` is the
false-positive rate: cards of the run never seen at a filter's terminal in its window that
the filter holds, over every (filter, such card) pair tested (at most `MAX_NEGATIVES` cards
per filter, a fixed-seed sample). Its `bound` is the configured `fpp`, in the same unit; each
filter is sized for `expected_items` cards, so one holding fewer has a lower rate, reported
as `expected_fpp` (Spark's `expectedFpp()`, (bits set / bits) ** k, averaged over filters).
`false_negatives` must be 0: a Bloom filter never misses a card put in it.

`endpoint_effect(...)` / `python -m streamsim.evaluate.bloom --suite FILE`: on a suite's
runs (the report split, `config/suites/cards-report.yaml`), what the review of compromised
cards does at the endpoint. Each run goes through the fraud endpoint's own service in process
(as `streamsim.evaluate.suite` runs it) with the filters the job would publish: built from the
run's requests in Python, bit for bit the job's (`detectors.cards.bloom.SparkBloomFilter`,
tested against Spark in `tests/unit/test_cards_bloom.py`), with the job's windows (terminal
rule window sliding by `rule_slide`, exact distinct cards as the python rules form counts
them) and each loaded once the request stream's event time reaches the window's end plus the
job's watermark (when the job would emit it; the job's batch delay is not modelled). The
`compromised_card` alerts are then left out to score the endpoint without the review: that
alert changes no state the other rules read (it never declines alone, and a card-not-present
use anchors no location). Reported per run and summed: compromised-terminal recall and
precision with and without, and the decisions the review changed, on fraud events and on
legitimate ones (the false reviews and declines it adds); and `cash_out`: the endpoint's
decisions on the incidents' cash-out purchases (the exposed cards' later card-not-present
uses, `scenarios.cards.fraud`) with the review and without it, and the other rules that
fired on them.
"""

from __future__ import annotations

import argparse
import bisect
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson
import pandas as pd

from core.config import StackConfig, load_model
from detectors.cards.bloom import RULE, CompromisedCardParams, SparkBloomFilter
from detectors.cards.terminal import TerminalParams

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from pipeline.jobs.cards.config import CardsSettings

#: Cards tested per filter for false positives at most (a fixed-seed sample of the rest).
MAX_NEGATIVES = 5_000
SEED = 35
LABEL = "compromised_terminal"
#: A card token a filter can hold (`detectors.cards.bloom.token_key`); others are left out.
TOKEN_PATTERN = r"^tok_[0-9a-f]{15}"
#: The transaction fields the filters are built from.
COLUMNS = ("event_id", "event_time", "card_token", "merchant_id", "terminal_id", "amount")


def terminal_of(events: pd.DataFrame, key: str) -> pd.Series:
    """What the terminal rule counts cards at (`terminal_key`), as the job's `_terminal`."""
    if key == "merchant" or "terminal_id" not in events.columns:
        return events["merchant_id"]
    return events["terminal_id"].where(events["terminal_id"].notna(), events["merchant_id"])


def exact_members(
    events: pd.DataFrame, terminal_key: str
) -> dict[str, tuple[list[int], list[str]]]:
    """Per terminal: its uses' event times, sorted, and their cards (`card_token`)."""
    frame = pd.DataFrame(
        {
            "terminal": terminal_of(events, terminal_key),
            "t": events["event_time"].astype("int64"),
            "card": events["card_token"],
        }
    ).sort_values(["terminal", "t"], kind="stable")
    out = {}
    for terminal, rows in frame.groupby("terminal", sort=False):
        out[str(terminal)] = (rows["t"].tolist(), rows["card"].tolist())
    return out


def cards_in(uses: tuple[list[int], list[str]], start: int, end: int) -> set[str]:
    times, cards = uses
    return set(cards[bisect.bisect_left(times, start) : bisect.bisect_left(times, end)])


def bloom_figures(
    filters: list[tuple[str, int, int, SparkBloomFilter]],
    members: dict[str, tuple[list[int], list[str]]],
    all_cards: list[str],
    params: CompromisedCardParams,
) -> dict[str, Any]:
    """The `bloom` entry from (terminal, window_start, window_end, filter) and exact
    membership."""
    rng = np.random.default_rng(SEED)
    positives = false_negatives = negatives = false_positives = 0
    fill = []
    for terminal, start, end, bloom in filters:
        held = cards_in(members[terminal], start, end)
        positives += len(held)
        false_negatives += sum(not bloom.might_contain_token(c) for c in held)
        others = [c for c in all_cards if c not in held]
        if len(others) > MAX_NEGATIVES:
            picked = rng.choice(len(others), MAX_NEGATIVES, replace=False)
            others = [others[i] for i in sorted(picked)]
        negatives += len(others)
        false_positives += sum(bloom.might_contain_token(c) for c in others)
        fill.append(bloom.expected_fpp())
    observed = false_positives / negatives if negatives else None
    return {
        "unit": "false-positive rate (the unit of fpp)",
        "bound": params.fpp,
        "observed_error": None if observed is None else round(observed, 6),
        "within_bound": None if observed is None else observed <= params.fpp,
        "expected_fpp": float(f"{np.mean(fill):.3g}") if fill else None,
        "expected_items": params.expected_items,
        "filters": len(filters),
        "members": positives,
        "false_negatives": false_negatives,
        "negatives_tested": negatives,
        "false_positives": false_positives,
    }


def bloom_block(
    spark: SparkSession,
    events: pd.DataFrame,
    settings: CardsSettings,
    params: CompromisedCardParams | None = None,
) -> dict[str, Any]:
    """The `bloom` entry over the run's transactions (pandas: `event_id`, `event_time`,
    `card_token`, `merchant_id`, `terminal_id`, `amount`; each event id once; those without a
    token of `TOKEN_PATTERN` left out), the filters built by the job's own query code in
    Spark (`spark_windows`)."""
    p = params or CompromisedCardParams()
    keyed = events[events["card_token"].astype("string").str.match(TOKEN_PATTERN, na=False)]
    return window_figures(spark_windows(spark, keyed, settings, p), keyed, settings, p)


def spark_windows(
    spark: SparkSession,
    events: pd.DataFrame,
    settings: CardsSettings,
    params: CompromisedCardParams,
) -> list[Any]:
    """The job's `cards.compromised-cards` records (Rows) over the events, as a batch."""
    from pyspark.sql import functions as F

    from pipeline.jobs.cards.bloom import compromised_windows

    frame = events[list(COLUMNS)].astype({"event_time": "int64", "amount": "float64"})
    tx = spark.createDataFrame(
        frame, "event_id string, event_time long, card_token string, merchant_id string, "
        "terminal_id string, amount double",
    ).withColumn("event_ts", F.timestamp_millis("event_time"))  # fmt: skip
    return compromised_windows(tx, settings, params).collect()


def window_figures(
    rows: list[Any],
    events: pd.DataFrame,
    settings: CardsSettings,
    params: CompromisedCardParams,
) -> dict[str, Any]:
    """`bloom_figures` of the job's records against the events' exact membership."""
    filters = [
        (r.terminal_id, r.window_start, r.window_end, SparkBloomFilter.from_base64(r.filter))
        for r in rows
    ]
    members = exact_members(events, settings.terminal_key)
    return bloom_figures(filters, members, sorted(set(events["card_token"])), params)


def python_filters(
    events: pd.DataFrame,
    terminal: TerminalParams,
    slide_ms: int,
    terminal_key: str,
    params: CompromisedCardParams,
) -> list[tuple[str, int, int, SparkBloomFilter]]:
    """The filters the job publishes (every window the rule fires on, exact distinct cards),
    built in Python: (terminal, window_start, window_end, filter)."""
    length = max(1, round(terminal.window_s * 1000))
    out = []
    for name, (times, cards) in exact_members(events, terminal_key).items():
        if len(set(cards)) < terminal.min_distinct_cards:
            continue
        first = (times[0] - length) // slide_ms * slide_ms + slide_ms
        for start in range(first, times[-1] + 1, slide_ms):
            held = cards_in((times, cards), start, start + length)
            if len(held) < terminal.min_distinct_cards:
                continue
            bloom = SparkBloomFilter.create(params.expected_items, num_bits=params.num_bits)
            for card in held:
                bloom.put_token(card)
            out.append((name, start, start + length, bloom))
    return out


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    with path.open("rb") as f:
        for line in f:
            yield orjson.loads(line)


def endpoint_run(
    folder: Path, stack: StackConfig, settings_path: Path | None, pipeline_path: Path
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """One simulated run's requests (in `folder`) through the endpoint with the filters:
    its detections (label, event_ids, rule, transaction_id) and the filters' figures."""
    from api.fraud.decision import score_of
    from api.fraud.models import TransactionRequest
    from api.fraud.service import FraudService
    from api.fraud.settings import ApiSettings, load_secrets
    from pipeline.config import PipelineConfig
    from pipeline.settings import duration_ms

    chosen = load_model(ApiSettings, settings_path) if settings_path else ApiSettings()
    params = chosen.compromised_cards or CompromisedCardParams()
    chosen = chosen.model_copy(update={"compromised_cards": params})
    job = load_model(PipelineConfig, pipeline_path)
    service = FraudService(chosen, load_secrets(stack))
    if (folder / "profiles.jsonl").exists():
        for record in _lines(folder / "profiles.jsonl"):
            service.profiles.put(record)
    requests = [TransactionRequest.model_validate(r) for r in _lines(folder / "events.jsonl")]
    tokens = {tx.card_number: service.tokenizer.token(tx.card_number) for tx in requests}
    events = pd.DataFrame(
        {
            "event_id": [tx.transaction_id for tx in requests],
            "event_time": [tx.event_time for tx in requests],
            "card_token": [tokens[tx.card_number] for tx in requests],
            "merchant_id": [tx.merchant_id for tx in requests],
            "terminal_id": [tx.terminal_id for tx in requests],
        }
    ).drop_duplicates("event_id")
    cards = job.cards
    slide = cards.rule_slide_ms or max(1, round(cards.terminal.window_s * 1000))
    filters = python_filters(events, cards.terminal, slide, cards.terminal_key, params)
    delay = duration_ms(job.watermark)
    pending = sorted(filters, key=lambda f: (f[2], f[0], f[1]))
    figures = bloom_figures(
        filters, exact_members(events, cards.terminal_key), sorted(set(tokens.values())), params
    )
    store = service.compromised
    assert store is not None
    rows = []
    changed: dict[str, int] = {}
    decided: dict[str, tuple[str, str, list[str]]] = {}
    i = 0
    for tx in requests:
        while i < len(pending) and pending[i][2] + delay <= tx.event_time:
            terminal, start, end, bloom = pending[i]
            store.put(
                {
                    "schema": "cards.compromised-cards/1",
                    "item": "token_key",
                    "terminal_id": terminal,
                    "window_start": start,
                    "window_end": end,
                    "fpp": params.fpp,
                    "filter": bloom.to_base64(),
                }
            )
            i += 1
        body = orjson.loads(service.handle(tx))
        alerts = body["evidence"].get("alerts") or []
        for a in alerts:
            rows.append(
                {
                    "label": a.get("label"),
                    "event_ids": a.get("event_ids"),
                    "rule": a.get("rule"),
                    "transaction_id": tx.transaction_id,
                }
            )
        rules = {a["rule"] for a in alerts}
        without = body["decision"]
        if RULE in rules:
            _, without = score_of(rules - {RULE}, chosen)
            if without != body["decision"]:
                key = f"{without}->{body['decision']}:{tx.transaction_id}"
                changed[key] = 1
        decided[tx.transaction_id] = (body["decision"], without, sorted(rules - {RULE}))
    frame = pd.DataFrame(rows, columns=["label", "event_ids", "rule", "transaction_id"])
    frame["detected_sim_ms"] = np.nan
    merchants = dict(zip(events["event_id"], events["merchant_id"], strict=True))
    return frame, {
        "filters": figures,
        "changed": list(changed),
        "decided": decided,
        "merchant": merchants,
    }


def cash_out_events(truth: pd.DataFrame, merchant: dict[str, str]) -> set[str]:
    """The compromised-terminal incidents' cash-out purchases among the events the endpoint
    saw: each incident's uses after its window, told apart as uses at another merchant than
    its first use's, or by a card already used at that merchant in the incident.

    >>> truth = pd.DataFrame({"event_id": ["a", "b", "c", "d", "n"],
    ...     "label": [LABEL] * 4 + ["none"], "incident_id": ["i"] * 4 + [None],
    ...     "true_time": [0, 1, 9, 10, 5], "entity_id": ["c1", "c2", "c1", "c2", "c3"],
    ...     "duplicate_of": None})
    >>> sorted(cash_out_events(truth, {"a": "m", "b": "m", "c": "w", "d": "m", "n": "m"}))
    ['c', 'd']
    """
    mine = truth[
        (truth["label"] == LABEL)
        & truth["incident_id"].notna()
        & truth["duplicate_of"].isna()
        & truth["event_id"].isin(list(merchant))
    ].sort_values("true_time", kind="stable")
    out = set()
    for _, rows in mine.groupby("incident_id", sort=False):
        where = [merchant[e] for e in rows["event_id"]]
        seen: set[str] = set()
        for event, card, at in zip(rows["event_id"], rows["entity_id"], where, strict=True):
            if at != where[0] or card in seen:
                out.add(str(event))
            else:
                seen.add(card)
    return out


def cash_out_figures(
    cash_out: set[str], decided: dict[str, tuple[str, str, list[str]]]
) -> dict[str, Any]:
    """What the endpoint decided on the cash-out purchases, with the review and without it
    (the other rules alone), and which of the other rules fired on them."""
    rows = [decided[e] for e in sorted(cash_out)]
    fired: dict[str, int] = {}
    for _, _, rules in rows:
        for rule in rules:
            fired[rule] = fired.get(rule, 0) + 1
    return {
        "events": len(rows),
        "with": {d: sum(r[0] == d for r in rows) for d in ("approve", "review", "decline")},
        "without": {d: sum(r[1] == d for r in rows) for d in ("approve", "review", "decline")},
        "other_rules_fired": dict(sorted(fired.items())),
    }


def endpoint_effect(
    suite_path: Path,
    stack: StackConfig,
    pipeline_path: Path = Path("config/pipelines/cards.yaml"),
    seeds: list[int] | None = None,
    variants: list[str] | None = None,
    progress: bool = True,
    entities: int | None = None,
    duration_s: float | None = None,
) -> dict[str, Any]:
    """Per run of the suite (its seeds x variants, or those given): compromised-terminal
    recall and precision at the endpoint with and without the review of compromised cards,
    and the decisions the review changed, on fraud events and on legitimate ones."""
    from scenarios.catalog import ScenarioConfig, build_scenario
    from simulators.engine import Engine
    from simulators.sinks import JsonlSink
    from streamsim.evaluate.scoring import RUNNING_MS, score_path
    from streamsim.evaluate.suite import SCENARIO_LABELS, load_suite, run_data

    suite = load_suite(suite_path)
    base = load_model(ScenarioConfig, suite.scenario)
    kinds = list(SCENARIO_LABELS["cards"])
    runs = []
    for variant in suite.variants:
        if variants and variant.name not in variants:
            continue
        for seed in seeds or suite.seeds:
            data = run_data(suite, base, variant, seed, f"bloom-{suite.name}", entities, duration_s)
            data["domain"]["delivery"] = "http"
            cfg = ScenarioConfig.model_validate(data)
            with tempfile.TemporaryDirectory(prefix="bloom-") as tmp:
                scenario = build_scenario(cfg, stack)
                scenario.post = False  # type: ignore[attr-defined]
                Engine(scenario, cfg, JsonlSink(tmp), speed="max").run()
                truth = pd.DataFrame(_lines(Path(tmp) / "truth.jsonl"))
                detections, extra = endpoint_run(Path(tmp), stack, suite.settings, pipeline_path)
            without = detections[detections["rule"] != RULE]
            score = {}
            for name, found in (("with", detections), ("without", without)):
                scored = score_path(
                    found[["label", "event_ids", "detected_sim_ms"]], truth, kinds,
                    suite.horizon_ms, None, suite.running_ms or RUNNING_MS,
                )[LABEL]  # fmt: skip
                score[name] = {
                    k: scored.get(k)
                    for k in ("support", "recall", "precision", "incident_precision", "detections")
                }
            fraud = set(truth.loc[truth["label"] != "none", "event_id"])
            changes: dict[str, int] = {}
            for item in extra["changed"]:
                move, txid = item.split(":", 1)
                kind = "fraud" if txid in fraud else "legitimate"
                changes[f"{move} ({kind})"] = changes.get(f"{move} ({kind})", 0) + 1
            cash_out = cash_out_events(truth, extra["merchant"])
            review = detections[detections["rule"] == RULE]
            hits = int(review["transaction_id"].isin(list(fraud)).sum())
            run = {
                "variant": variant.name,
                "seed": seed,
                "compromised_terminal": score,
                "compromised_card_alerts": len(review),
                "compromised_card_alerts_on_fraud": hits,
                "decisions_changed": changes,
                "cash_out": cash_out_figures(cash_out, extra["decided"]),
                "truth_events": len(truth),
                "bloom": extra["filters"],
            }
            runs.append(run)
            if progress:
                print(orjson.dumps(run).decode(), flush=True)
    return {"suite": suite.name, "split": suite.split, "runs": runs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", type=Path, default=Path("config/suites/cards-report.yaml"))
    parser.add_argument("--config", type=Path, default=None, help="stack config")
    parser.add_argument("--seeds", type=int, nargs="*")
    parser.add_argument("--variants", nargs="*")
    parser.add_argument("--entities", type=int, help="cards per run, instead of the suite's")
    parser.add_argument("--duration-s", type=float, help="run length, instead of the suite's")
    args = parser.parse_args()
    from core.config import load_stack

    stack = load_stack(args.config)
    report = endpoint_effect(
        args.suite,
        stack,
        seeds=args.seeds,
        variants=args.variants,
        entities=args.entities,
        duration_s=args.duration_s,
    )
    print(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
