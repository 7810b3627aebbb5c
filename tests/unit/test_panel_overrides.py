"""The override allow-list of run control: which keys a run request may set, per scenario, the
422 that names any other key, and that the panel's sliders offer allow-listed keys only."""

from __future__ import annotations

import re
import shutil
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient

from api.fraud.publisher import MemoryPublisher
from api.fraud.service import FraudService
from api.fraud.settings import ApiSecrets, ApiSettings
from api.main import create_app
from core.contracts.labels import VEHICLE_FAULTS
from runs.manager import RunManager
from runs.overrides import InvalidOverrides, apply_overrides
from runs.run import RunSpec
from runs.tunable import PANEL_MAX_ENTITIES, TunableKeys
from scenarios.catalog import ScenarioConfig
from tests.conftest import REPO_ROOT
from ui.knobs import knobs_for, run_request

SCENARIOS = REPO_ROOT / "config" / "scenarios"
FILES = sorted(SCENARIOS.glob("*.yaml"))
TOKEN = "ctl-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
RATE_KEY = re.compile(r"^rate($|_)|_rate$")


def raw(name: str) -> dict[str, Any]:
    return dict(yaml.safe_load((SCENARIOS / f"{name}.yaml").read_text()))


def resolved(data: Mapping[str, Any]) -> dict[str, Any]:
    return ScenarioConfig.model_validate(data).model_dump(mode="json")


def problems(name: str, overrides: dict[str, Any]) -> list[dict[str, Any]]:
    return TunableKeys.of(raw(name)).check(overrides)


def locs(name: str, overrides: dict[str, Any]) -> list[list[str]]:
    return [p["loc"] for p in problems(name, overrides)]


# -- what is refused -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "loc"),
    [
        ({"domain": {"endpoint": {"url": "http://evil.example/"}}}, ["domain", "endpoint", "url"]),
        ({"domain": {"topic": "alerts"}}, ["domain", "topic"]),
        ({"name": "vehicles"}, ["name"]),
        ({"run_id": "someone-elses"}, ["run_id"]),
        ({"kind": "scenario"}, ["kind"]),
        ({"tick_s": 0.001}, ["tick_s"]),
        ({"pacing": {"shape": {"type": "constant", "rate": 1e9}}}, ["pacing", "shape"]),
        ({"delivery": {"max_delay_s": 1e9}}, ["delivery", "max_delay_s"]),
        ({"domain": {"token_hex_chars": 16}}, ["domain", "token_hex_chars"]),
        ({"domain": {"fraud": {"card_testing": {"max_amount": 1e6}}}},
         ["domain", "fraud", "card_testing", "max_amount"]),
        ({"domain": {"fraud": {"nope": {"rate_per_1k_card_hours": 1}}}},
         ["domain", "fraud", "nope", "rate_per_1k_card_hours"]),
        ({"classes": [{"name": "pos_terminal"}]}, ["classes"]),
        ({"classes": {"pos_terminal": {"share": 9}}}, ["classes", "pos_terminal", "share"]),
        ({"classes": {"nope": {"clock": {"jumps": {"probability": 0.1}}}}},
         ["classes", "nope", "clock", "jumps", "probability"]),
    ],
)  # fmt: skip
def test_a_key_off_the_list_is_refused_by_its_exact_path(
    overrides: dict[str, Any], loc: list[str]
) -> None:
    (problem,) = problems("cards", overrides)
    assert problem["loc"] == loc and problem["type"] == "not_tunable"
    assert f"'{'.'.join(loc)}'" in problem["msg"]


def test_the_message_lists_what_is_tunable_there() -> None:
    (problem,) = problems("cards", {"domain": {"endpoint": {"url": "http://x/"}}})
    assert problem["msg"].endswith("under 'domain' are: delivery, fraud, hard_negatives")
    (problem,) = problems("cards", {"classes": [{"name": "x"}]})
    assert "takes a mapping" in problem["msg"] and "pos_terminal" in problem["msg"]


def test_entities_have_a_panel_bound() -> None:
    assert problems("sensors", {"entities": PANEL_MAX_ENTITIES}) == []
    (problem,) = problems("sensors", {"entities": 10_000_000})
    assert problem["loc"] == ["entities"] and problem["type"] == "less_than_equal"
    assert problem["ctx"] == {"le": PANEL_MAX_ENTITIES} and "10000000" in problem["msg"]
    # Shipping's class shares are its counts: its entities are not tunable at all.
    assert locs("shipping", {"entities": 100}) == [["entities"]]


def test_every_refused_key_is_named_at_once() -> None:
    assert locs(
        "vehicles",
        {
            "seed": 3,
            "run_id": "x",
            "domain": {"topic": "alerts", "faults": {"rate_per_hour": {"overheating": 1}}},
        },
    ) == [["run_id"], ["domain", "topic"]]


# -- what is accepted ------------------------------------------------------------------------


def test_the_tunable_keys_of_a_run() -> None:
    overrides = {
        "seed": 9,
        "duration_s": 60,
        "entities": 500,
        "pacing": {"speed": "max", "max_rate": 1000},
        "clock": {"offset_s": {"type": "normal", "mean": 0, "std": 5}, "jumps": {"probability": 0}},
        "delivery": {
            "delay_s": {"type": "lognormal", "median": 1.0, "sigma": 0.5},
            "outages": {"rate_per_hour": 3, "duration_s": {"type": "exponential", "mean": 60}},
            "duplicates": {"probability": 0.01},
            "drops": {"probability": 0.01},
        },
        "classes": {"env_sensor": {"delivery": {"outages": {"flush_duplicates": 0.1}}}},
        "domain": {"faults": {"rate_per_hour": 1.0, "mix": {"spike": 0.9, "stuck_sensor": 0.1}}},
    }
    assert problems("sensors", overrides) == []


def test_each_entry_of_a_rate_keyed_by_type_is_tunable() -> None:
    every = {fault: 0.5 for fault in VEHICLE_FAULTS}
    assert problems("vehicles", {"domain": {"faults": {"rate_per_hour": every}}}) == []
    assert locs("vehicles", {"domain": {"faults": {"rate_per_hour": {"flat_tyre": 1}}}}) == [
        ["domain", "faults", "rate_per_hour", "flat_tyre"]
    ]
    # The fault's own parameters are not rates: refused.
    assert locs("vehicles", {"domain": {"faults": {"speeding": {"duration_s": 1}}}}) == [
        ["domain", "faults", "speeding", "duration_s"]
    ]
    assert locs("sensors", {"domain": {"faults": {"mix": {"drift": 1}}}}) == [
        ["domain", "faults", "mix", "drift"]
    ]


def value_at(data: Any, path: list[str]) -> tuple[bool, Any]:
    """The value at a dotted key's parts; `classes.<name>` is the class of that name."""
    if path[:1] == ["classes"] and len(path) > 1:
        data = {"classes": {c["name"]: c for c in data["classes"]}}
    for part in path:
        if not isinstance(data, Mapping) or part not in data:
            return False, None
        data = data[part]
    return True, data


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_every_listed_key_exists_in_the_scenario(path: Path) -> None:
    """No stale entry: each key is a setting of the resolved file, or an entry of a mapping
    keyed by type (the vehicles' rates: an entry left out is 0)."""
    config = resolved(yaml.safe_load(path.read_text()))
    keys = TunableKeys.of(config).dotted()
    assert {"seed", "duration_s", "pacing.max_rate", "delivery.drops.probability"} <= set(keys)
    for key in keys:
        parts = key.split(".")
        found, _ = value_at(config, parts)
        parent_found, parent = value_at(config, parts[:-1])
        assert found or (parent_found and isinstance(parent, dict)), key


def rate_leaves(node: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every number under a `rate...` key, each entry of a mapping of rates included."""
    if not isinstance(node, Mapping) or ("type" in node and path):
        return
    for key, value in node.items():
        here = (*path, key)
        if RATE_KEY.search(key) and isinstance(value, Mapping):
            yield from (((*here, k)) for k, v in value.items() if isinstance(v, int | float))
        elif RATE_KEY.search(key) and isinstance(value, int | float):
            yield here
        else:
            yield from rate_leaves(value, here)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_every_rate_of_every_scenario_has_a_slider(path: Path) -> None:
    config = resolved(yaml.safe_load(path.read_text()))
    tunable = TunableKeys.of(config).dotted()
    keys = {k.key for k in knobs_for(config, tunable)}
    rates = {"domain." + ".".join(p) for p in rate_leaves(config["domain"])}
    assert rates <= keys, sorted(rates - keys)


def test_the_vehicles_get_a_slider_per_fault_type() -> None:
    config = resolved(raw("vehicles"))
    del config["domain"]["faults"]["rate_per_hour"]["speeding"]  # left out: 0
    knobs = {k.key: k for k in knobs_for(config, TunableKeys.of(config).dotted())}
    for fault in VEHICLE_FAULTS:
        knob = knobs[f"domain.faults.rate_per_hour.{fault}"]
        assert knob.group == "mix" and knob.default == (0.0 if fault == "speeding" else 0.05)
    values = {k: v.default for k, v in knobs.items()}
    values["domain.faults.rate_per_hour.speeding"] = 0.4
    request = run_request(config, list(knobs.values()), values)
    assert request.overrides == {"domain": {"faults": {"rate_per_hour": {"speeding": 0.4}}}}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_the_panel_offers_only_listed_keys(path: Path) -> None:
    """Every slider of every scenario file, moved, sends only keys the API accepts."""
    data = yaml.safe_load(path.read_text())
    config = resolved(data)
    tunable = TunableKeys.of(config)
    knobs = knobs_for(config, tunable.dotted())
    assert knobs_for(config, []) == [k for k in knobs if k.scope == "run"]  # speed, duration
    values = {}
    for knob in knobs:
        options = [o for o in knob.options if o != knob.default]
        values[knob.key] = options[-1] if knob.kind == "select" else knob.high
    request = run_request(config, knobs, values)
    assert request.overrides and tunable.check(request.overrides) == []


# -- run control -----------------------------------------------------------------------------


@pytest.fixture
def runs(tmp_path: Path) -> RunManager:
    folder = tmp_path / "scenarios"
    folder.mkdir()
    for path in FILES:
        shutil.copy(path, folder / path.name)

    def command(spec: RunSpec) -> list[str]:
        return [sys.executable, "-c", "print('{}')"]

    return RunManager(tmp_path / "runs", scenario_dir=folder, command=command)


def test_a_refused_key_starts_nothing_and_an_allowed_one_starts(runs: RunManager) -> None:
    with pytest.raises(InvalidOverrides) as info:
        runs.start("cards", overrides={"domain": {"endpoint": {"url": "http://x/"}}})
    assert [p["loc"] for p in info.value.problems] == [["domain", "endpoint", "url"]]
    assert runs.list() == []
    over = {"domain": {"faults": {"rate_per_hour": {"gps_jump": 0.3}}}}
    run = runs.start("vehicles", overrides=over)
    written = yaml.safe_load((run.workdir / "scenario.yaml").read_text())
    assert written["domain"]["faults"]["rate_per_hour"]["gps_jump"] == 0.3
    assert written["domain"]["faults"]["rate_per_hour"]["speeding"] == 0.05  # merged
    assert written == apply_overrides({**raw("vehicles"), "run_id": run.run_id}, over)
    assert run.done.wait(180)


def test_scenarios_list_their_tunable_keys(runs: RunManager) -> None:
    listed = {s["name"]: s["tunable"] for s in runs.scenarios()}
    assert "domain.faults.rate_per_hour.battery_failure" in listed["vehicles"]
    assert "classes.truck.delivery.outages.rate_per_hour" in listed["vehicles"]
    assert "entities" not in listed["shipping"]
    assert not any("endpoint" in k or "topic" in k for k in listed["cards"])


@pytest.fixture
def client(runs: RunManager) -> Iterator[TestClient]:
    service = FraudService(
        ApiSettings(gc_freeze_interval_s=None),
        ApiSecrets(b"unit-test-secret-0123456789", TOKEN),
        publisher=MemoryPublisher(),
    )
    with TestClient(create_app(service, run_manager=runs)) as test_client:
        yield test_client


#: Every class of refused key the allow-list exists for (module docstring of
#: `runs.tunable`), each sent to the route of a scenario that has the key.
REFUSED: list[tuple[str, dict[str, Any], list[str]]] = [
    # where card numbers go, where events land, whose ids and truth they are
    ("cards", {"domain": {"endpoint": {"url": "http://evil.example/"}}},
     ["domain", "endpoint", "url"]),
    ("cards", {"domain": {"topic": "alerts"}}, ["domain", "topic"]),
    ("sensors", {"domain": {"topic": "truth.cards"}}, ["domain", "topic"]),
    ("cards", {"name": "shipping"}, ["name"]),
    ("vehicles", {"name": "cards"}, ["name"]),
    ("cards", {"run_id": "r1"}, ["run_id"]),
    # entities above the panel's cap, and where they are not tunable at all
    ("cards", {"entities": 10_000_000}, ["entities"]),
    ("sensors", {"entities": PANEL_MAX_ENTITIES + 1}, ["entities"]),
    ("shipping", {"entities": 10}, ["entities"]),
    # unknown keys, at the top and nested under allowed parents
    ("cards", {"bogus": 1}, ["bogus"]),
    ("cards", {"pacing": {"warp": 9}}, ["pacing", "warp"]),
    ("cards", {"delivery": {"drops": {"probability": 0.1, "when": "now"}}},
     ["delivery", "drops", "when"]),
    ("cards", {"domain": {"fraud": {"nope": {"rate_per_1k_card_hours": 1}}}},
     ["domain", "fraud", "nope", "rate_per_1k_card_hours"]),
    ("vehicles", {"domain": {"faults": {"rate_per_hour": {"teleport": 1.0}}}},
     ["domain", "faults", "rate_per_hour", "teleport"]),
    ("sensors", {"domain": {"faults": {"mix": {"melted": 1.0}}}},
     ["domain", "faults", "mix", "melted"]),
    ("sensors", {"classes": {"smart_meter": {"delivery": {"drops": {"x": 1}}}}},
     ["classes", "smart_meter", "delivery", "drops", "x"]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("scenario", "overrides", "loc"), REFUSED, ids=[".".join(r[2]) + f"@{r[0]}" for r in REFUSED]
)
def test_the_route_answers_422_naming_the_key(
    client: TestClient, scenario: str, overrides: dict[str, Any], loc: list[str]
) -> None:
    response = client.post(
        "/v1/control/runs",
        json={"scenario": scenario, "overrides": overrides},
        headers=AUTH,
    )
    assert response.status_code == 422, response.text
    (item,) = response.json()["detail"]
    assert item["loc"] == ["body", "overrides", *loc]
    assert f"key '{'.'.join(loc)}'" in item["msg"], item
    assert client.get("/v1/runs").json()["runs"] == []


@pytest.mark.parametrize(
    ("body", "key"),
    [({"speed": 2, "domain": {"topic": "alerts"}}, "domain"), ({"entities": 5}, "entities"),
     ({"max_rate": 10, "run_id": "r1"}, "run_id")],
)  # fmt: skip
def test_the_live_route_takes_pacing_only_and_names_any_other_key(
    client: TestClient, body: dict[str, Any], key: str
) -> None:
    response = client.patch("/v1/control/runs/r-none/pacing", json=body, headers=AUTH)
    assert response.status_code == 422, response.text
    (item,) = response.json()["detail"]
    assert item["loc"] == ["body", key] and item["type"] == "extra_forbidden", item
