"""verify-stream: measured disorder matches configured parameters for several disorder settings,
and mismatches (wrong parameters, lost or invented records) are caught."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
import yaml
from typer.testing import CliRunner

from scenarios.catalog import ScenarioConfig, run_scenario
from simulators.sinks import JsonlSink
from streamsim.cli import app
from streamsim.verify import read_jsonl, verify
from streamsim.verify.measure import join, measure
from streamsim.verify.readers import Stream, Truth

BASE: dict[str, Any] = {
    "entities": 1000,
    "duration_s": 120,
    "seed": 11,
    "domain": {"type": "sensors", "interval_s": 2},
}

NO_DISORDER: dict[str, Any] = {
    "clock": {"offset_s": 0, "drift_ppm": 0},
    "delivery": {"delay_s": 0},
}

MODERATE: dict[str, Any] = {
    "clock": {"offset_s": {"type": "normal", "mean": 0.2, "std": 0.5}, "drift_ppm": 20},
    "delivery": {
        "delay_s": {"type": "lognormal", "median": 0.1, "sigma": 0.6},
        "outages": {"rate_per_hour": 6, "duration_s": {"type": "exponential", "mean": 20}},
        "duplicates": {"probability": 0.01},
        "drops": {"probability": 0.01},
    },
}

HEAVY: dict[str, Any] = {
    "clock": {
        "offset_s": {"type": "uniform", "low": -60, "high": 60},
        "drift_ppm": {"type": "normal", "mean": 100, "std": 50},
        "jumps": {"probability": 0.002, "size_s": {"type": "normal", "mean": 0, "std": 5}},
        "resets": {"probability": 0.0005, "duration_s": 30},
    },
    "delivery": {"delay_s": {"type": "exponential", "mean": 1.0}, "max_delay_s": 5},
    "classes": [
        {"name": "steady", "share": 0.5},
        {
            "name": "flaky",
            "share": 0.5,
            "delivery": {
                "outages": {
                    "rate_per_hour": 30,
                    "duration_s": {"type": "lognormal", "median": 15, "sigma": 0.8},
                    "buffer_cap": 4,
                    "drop_policy": "drop_newest",
                    "flush": "shuffled",
                },
                "duplicates": {"probability": 0.08, "retry_delay_s": 1},
                "drops": {"probability": 0.05},
            },
        },
    ],
}

SETTINGS = {"none": NO_DISORDER, "moderate": MODERATE, "heavy": HEAVY}


def scenario(settings: dict[str, Any]) -> ScenarioConfig:
    return ScenarioConfig.model_validate({**BASE, **settings})


@pytest.fixture(scope="module", params=list(SETTINGS))
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    out = tmp_path_factory.mktemp(request.param)
    cfg = scenario(SETTINGS[request.param])
    run_scenario(cfg, JsonlSink(out), speed="max")
    return request.param, cfg, out


def test_measured_figures_match_the_configured_parameters(run: Any) -> None:
    name, cfg, out = run
    report = verify(*read_jsonl(out, None), cfg)
    failed = {k: v for k, v in report["checks"].items() if not v["ok"]}
    assert report["ok"], failed
    checks = report["checks"]
    classes = [c.name for c in cfg.classes]
    for cls in classes:
        for figure in ("delay_p50_s", "delay_p99_s", "skew_p50_s", "duplicate_fraction"):
            assert f"{cls}.{figure}" in checks
    if name == "none":
        assert report["out_of_order_fraction"] == 0 and report["lateness_s"]["max"] == 0
        assert report["skew_s"] == {"mean": 0.0, "std": 0.0, "devices": 1000}
        assert "out_of_order_fraction" in checks
    else:
        assert report["out_of_order_fraction"] > 0 and report["duplicate_fraction"] > 0
        assert any(k.endswith("outage_fraction") and v["measured"] > 0 for k, v in checks.items())
    if name == "heavy":
        assert checks["flaky.max_backlog"]["measured"] <= 4
        assert report["drop_fraction"] > 0.02


@pytest.fixture(scope="module")
def moderate_stream(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("moderate-stream")
    run_scenario(scenario(MODERATE), JsonlSink(out), speed="max")
    return out


SKEW = ["default.skew_p25_s", "default.skew_p50_s", "default.skew_p75_s"]


@pytest.mark.parametrize(
    ("wrong", "failing"),
    [
        (
            {"delivery": {**MODERATE["delivery"], "duplicates": {"probability": 0.05}}},
            ["default.duplicate_fraction"],
        ),
        (
            {"delivery": {**MODERATE["delivery"], "drops": {"probability": 0.05}}},
            ["default.drop_fraction"],
        ),
        (
            {"delivery": {**MODERATE["delivery"], "delay_s": 0.3}},
            ["default.delay_p50_s", "default.delay_p99_s"],
        ),
        ({"clock": {**MODERATE["clock"], "offset_s": 2}}, SKEW),
        (
            {"delivery": {**MODERATE["delivery"], "outages": {"rate_per_hour": 60}}},
            ["default.outage_fraction"],
        ),
    ],
    ids=["duplicates", "drops", "delay", "skew", "outages"],
)
def test_a_parameter_the_stream_does_not_have_is_caught(
    moderate_stream: Path, wrong: dict, failing: list[str]
) -> None:
    report = verify(*read_jsonl(moderate_stream, None), scenario({**MODERATE, **wrong}))
    assert not report["ok"]
    assert [k for k, v in report["checks"].items() if not v["ok"]] == failing


def test_lost_and_invented_records_are_reported(tmp_path: Path) -> None:
    cfg = scenario(NO_DISORDER)
    run_scenario(cfg.with_overrides(entities=50, duration_s=20), JsonlSink(tmp_path), speed="max")
    lines = (tmp_path / "events.jsonl").read_bytes().splitlines()
    forged = orjson.loads(lines[0]) | {"event_id": "sf-forged-1"}
    (tmp_path / "events.jsonl").write_bytes(b"\n".join([*lines[1:], orjson.dumps(forged)]) + b"\n")
    report = verify(*read_jsonl(tmp_path, None), cfg.with_overrides(entities=50))
    assert report["lost"] == 1 and report["unexpected"] == 1
    assert not report["checks"]["lost"]["ok"] and not report["checks"]["unexpected"]["ok"]


def _stream(ids: list[str], times: list[int]) -> Stream:
    return Stream(ids, np.array(times), np.arange(len(ids)), None, None, 0)


def _truth(rows: list[tuple[str, str, int, int, int | None, bool]]) -> Truth:
    return Truth(
        [r[0] for r in rows],
        [r[1] for r in rows],
        np.array([r[2] for r in rows]),
        np.array([r[3] for r in rows]),
        np.array([-1 if r[4] is None else r[4] for r in rows]),
        [None] * len(rows),
        np.array([r[5] for r in rows]),
        [None if r[4] is not None else "network" for r in rows],
        ["none"] * len(rows),
    )


def test_measures_on_a_hand_made_stream() -> None:
    truth = _truth(
        [
            ("a", "s1", 1000, 1000, 1100, False),
            ("b", "s2", 2000, 2500, 2100, False),
            ("c", "s1", 3000, 3000, 3050, False),
            ("b", "s2", 2000, 2500, 4000, True),  # the retry of b
            ("d", "s1", 3500, 3500, None, False),  # lost in transit
        ]
    )
    # stream order: b(2500) a(1000) c(3000) b(2500): a and the retried b are late globally
    report = measure(join(_stream(["b", "a", "c", "b"], [2500, 1000, 3000, 2500]), truth))
    assert report["out_of_order_fraction"] == pytest.approx(2 / 3)
    assert report["out_of_order_fraction_by_key"] == 0.0  # each key is in order
    assert report["duplicate_fraction"] == pytest.approx(1 / 3)
    assert report["drop_fraction"] == pytest.approx(1 / 4)
    assert report["lateness_s"]["max"] == pytest.approx(2.0)
    assert report["skew_s"]["mean"] == pytest.approx(0.25)  # s1: 0 ms, s2: 500 ms
    assert report["lost"] == 0 and report["unexpected"] == 0


def test_cli_exit_codes_and_json(moderate_stream: Path, tmp_path: Path) -> None:
    cfg, out = scenario(MODERATE), moderate_stream
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump(cfg.model_dump(mode="json")))
    runner = CliRunner()
    ok = runner.invoke(
        app, ["verify-stream", "--events", str(out), "--config", str(good), "--json"]
    )
    assert ok.exit_code == 0, ok.output
    report = orjson.loads(ok.output.strip().splitlines()[-1])
    assert report["ok"] is True and set(report) >= {
        "out_of_order_fraction",
        "lateness_s",
        "skew_s",
        "duplicate_fraction",
        "drop_fraction",
        "max_backlog",
        "checks",
    }
    bad = tmp_path / "bad.yaml"
    data = cfg.model_dump(mode="json")
    data["delivery"]["drops"]["probability"] = 0.2
    data["classes"][0]["delivery"]["drops"]["probability"] = 0.2
    bad.write_text(yaml.safe_dump(data))
    failed = runner.invoke(app, ["verify-stream", "--events", str(out), "--config", str(bad)])
    assert failed.exit_code == 1 and "FAIL" in failed.output
    plain = runner.invoke(app, ["verify-stream", "--events", str(out), "--json"])
    assert plain.exit_code == 0 and "checks" not in orjson.loads(plain.output.splitlines()[-1])
