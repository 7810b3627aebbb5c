"""`streamsim loadtest` against the real fraud endpoint (`streamsim api`) and the real broker:
the report follows the contract, lax SLOs pass (exit 0), an impossible one fails (exit 1)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson
import pytest

from tests.conftest import REPO_ROOT, STREAMSIM

pytestmark = pytest.mark.integration


def loadtest(tmp_path: Path, url: str, slo: str) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "tiny.yaml"
    config.write_text(
        "kind: loadtest\n"
        f"target: {{url: '{url}'}}\n"
        "load: {type: constant, rate: 200}\n"
        "duration_s: 3\nwarmup_s: 1\n"
        "payload: {cards: 500, cities: 50, invalid_share: 0.05, impossible_travel_share: 0.05,"
        " card_testing_share: 0.1, card_testing_burst: 5}\n"
        "client: {connections: 8}\n"
        f"slo: {slo}\n"
    )
    return subprocess.run(
        [STREAMSIM, "loadtest", str(config), "--json", "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=180,
    )


def test_report_per_contract_and_exit_0_with_lax_slos(tmp_path: Path, endpoint: str) -> None:
    lax = "{p50_ms: 2000, p90_ms: 3000, p99_ms: 5000, p999_ms: 8000, max_ms: 9000, error_rate: 0}"
    run = loadtest(tmp_path, endpoint, lax)
    assert run.returncode == 0, run.stdout + run.stderr
    report = orjson.loads(run.stdout.strip().splitlines()[-1])
    assert {"requests", "errors", "achieved_rate", "latency_ms", "slo", "ok"} <= set(report)
    assert isinstance(report["requests"], int) and report["requests"] > 400
    assert report["errors"] == 0 and report["ok"] is True
    assert report["achieved_rate"] > 0
    assert set(report["latency_ms"]) == {"p50", "p90", "p99", "p999", "max"}
    assert all(isinstance(v, float) for v in report["latency_ms"].values())
    for check in report["slo"].values():
        assert set(check) == {"threshold", "measured", "ok"} and check["ok"] is True
    # The invalid share got 422s (not errors), and the fraud mix reached the rules.
    assert report["statuses"]["422"] > 0
    assert report["decisions"]["decline"] > 0  # impossible travel
    assert report["decisions"]["review"] > 0  # card-testing bursts (velocity)
    assert (tmp_path / "out" / "report.json").exists()


def test_exit_1_with_an_impossible_slo(tmp_path: Path, endpoint: str) -> None:
    run = loadtest(tmp_path, endpoint, "{p99_ms: 0.001}")
    assert run.returncode == 1, run.stdout + run.stderr
    report = orjson.loads(run.stdout.strip().splitlines()[-1])
    assert report["ok"] is False
    assert report["slo"]["p99_ms"]["ok"] is False
    assert report["slo"]["p99_ms"]["measured"] > 0.001
