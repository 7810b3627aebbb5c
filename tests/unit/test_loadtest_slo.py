"""SLO checks, the report's contract keys, and `streamsim loadtest` exit codes (against the
canned-response server, a real HTTP server that answers everything with 200; exit 0 with lax
SLOs is in the integration test against the real endpoint)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from streamsim.loadtest.config import SloSettings
from streamsim.loadtest.report import summary
from streamsim.loadtest.slo import all_ok, evaluate
from tests.conftest import REPO_ROOT, STREAMSIM, free_port

LATENCY = {"p50": 1.0, "p90": 2.0, "p99": 5.0, "p999": 9.0, "max": 12.0}


def test_each_set_threshold_is_checked_in_its_direction() -> None:
    slo = SloSettings(
        p50_ms=1.0, p99_ms=4.0, max_ms=100, error_rate=0.01, achieved_rate_fraction=0.9
    )
    figures = {
        "latency_ms": LATENCY,
        "error_rate": 0.01,
        "achieved_rate_fraction": 0.89,
        "in_flight_limit_hits": 0,
    }
    checks = evaluate(slo, figures)
    assert set(checks) == {
        "p50_ms",
        "p99_ms",
        "max_ms",
        "error_rate",
        "achieved_rate_fraction",
        "in_flight_limit_hits",
    }
    assert checks["p50_ms"] == {"threshold": 1.0, "measured": 1.0, "ok": True}  # at the bound
    assert checks["p99_ms"]["ok"] is False
    assert checks["max_ms"]["ok"] is True
    assert checks["error_rate"]["ok"] is True
    assert checks["achieved_rate_fraction"] == {"threshold": 0.9, "measured": 0.89, "ok": False}
    assert checks["in_flight_limit_hits"]["ok"] is True
    assert not all_ok(checks)
    assert all_ok(
        evaluate(SloSettings(p99_ms=5.0), figures | {"achieved_rate_fraction": 1, "error_rate": 0})
    )


def test_an_unmeasured_figure_fails_its_check() -> None:
    none = dict.fromkeys(LATENCY)
    figures = {
        "latency_ms": none,
        "error_rate": None,
        "achieved_rate_fraction": None,
        "in_flight_limit_hits": 0,
    }
    checks = evaluate(SloSettings(p99_ms=10), figures)
    assert checks["p99_ms"] == {"threshold": 10.0, "measured": None, "ok": False}
    assert not all_ok(checks)


@pytest.fixture(scope="module")
def canned() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamsim.bench.canned_server", "127.0.0.1", str(port)]
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    import socket

    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            time.sleep(0.05)
    yield url
    proc.terminate()
    proc.wait(10)


def loadtest(tmp_path: Path, url: str, slo: str, *extra: str) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "lt.yaml"
    config.write_text(
        "kind: loadtest\nname: canned\n"
        f"target: {{url: '{url}'}}\n"
        "load: {type: step, steps: [{at_s: 0, rate: 100}, {at_s: 1, rate: 200}]}\n"
        "duration_s: 1.5\nwarmup_s: 0.5\n"
        "payload: {cards: 100, cities: 20, invalid_share: 0}\n"
        "client: {connections: 4}\n"
        f"slo: {slo}\n"
    )
    return subprocess.run(
        [STREAMSIM, "loadtest", str(config), "--out", str(tmp_path / "out"), *extra],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=120,
    )


def test_json_report_charts_and_exit_1_when_an_slo_fails(tmp_path: Path, canned: str) -> None:
    run = loadtest(tmp_path, canned, "{p99_ms: 0.001, max_ms: 10000}", "--json")
    assert run.returncode == 1, run.stderr
    report = orjson.loads(run.stdout.strip().splitlines()[-1])
    assert list(report)[:6] == ["requests", "errors", "achieved_rate", "latency_ms", "slo", "ok"]
    assert set(report["latency_ms"]) == {"p50", "p90", "p99", "p999", "max"}
    assert report["ok"] is False and report["errors"] == 0
    assert report["slo"]["p99_ms"]["ok"] is False and report["slo"]["max_ms"]["ok"] is True
    assert report["requests"] == pytest.approx(100 * 0.5 + 200 * 1.0, abs=50)  # poisson
    for check in report["slo"].values():
        assert set(check) == {"threshold", "measured", "ok"}
    assert set(report["slo"]) == {
        "p99_ms",
        "max_ms",
        "error_rate",
        "achieved_rate_fraction",
        "in_flight_limit_hits",
    }
    out = tmp_path / "out"
    assert orjson.loads((out / "report.json").read_bytes())["requests"] == report["requests"]
    import altair  # only to validate the specs against the Vega-Lite schema

    for name, top_level in (
        ("latency_over_time", altair.VConcatChart),
        ("latency_percentiles", altair.Chart),
    ):
        spec = orjson.loads((out / f"{name}.vl.json").read_bytes())
        assert spec["$schema"].startswith("https://vega.github.io/schema/vega-lite/")
        top_level.from_dict(spec)  # raises on an invalid spec
        html = (out / f"{name}.html").read_text()
        assert "vegaEmbed" in html and '"$schema"' in html
    assert (out / "latency.hdr").stat().st_size > 0
    text = summary(report)
    assert "SLO p99_ms" in text and "FAIL" in text and text.endswith("SLO failed[/]")


def test_exit_2_on_a_bad_config_and_1_when_nothing_listens(tmp_path: Path) -> None:
    run = loadtest(tmp_path, "http://127.0.0.1:1", "{p99_ms: -1}")
    assert run.returncode == 2
    assert "key 'slo.p99_ms'" in run.stderr
    run = loadtest(tmp_path, f"http://127.0.0.1:{free_port()}", "{}")
    assert run.returncode == 1
    assert "cannot connect to" in run.stderr
