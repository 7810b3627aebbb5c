"""Each config rule: bad files name the file, the key path, the bad value and what is allowed."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.config import ConfigError, StackConfig, load_stack
from core.config.errors import key_path
from streamsim.config.kinds import load_file


def write(tmp_path: Path, text: str, name: str = "stack.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def error_for(path: Path) -> str:
    with pytest.raises(ConfigError) as info:
        load_file(path)
    return str(info.value)


def test_defaults_fill_every_key(tmp_path: Path) -> None:
    kind, model = load_file(write(tmp_path, "kind: stack\nkafka:\n  local:\n    port: 19092\n"))
    assert kind == "stack"
    assert isinstance(model, StackConfig)
    assert model.kafka.local.port == 19092
    assert model.kafka.local.controller_port == 9093
    assert model.spark.master == "local[*]"
    assert model.kafka.bootstrap_servers == "127.0.0.1:19092"


def test_invalid_yaml_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "kafka:\n  local: [unclosed\n")
    message = error_for(path)
    assert str(path) in message
    assert "not valid YAML at line" in message


def test_top_level_must_be_a_mapping(tmp_path: Path) -> None:
    assert "top level must be a mapping" in error_for(write(tmp_path, "- a\n- b\n"))


def test_unknown_key_is_named_with_its_path(tmp_path: Path) -> None:
    message = error_for(write(tmp_path, "kafka:\n  local:\n    prot: 9092\n"))
    assert "key 'kafka.local.prot' is not a known setting" in message


def test_out_of_range_value_names_key_value_and_limit(tmp_path: Path) -> None:
    message = error_for(write(tmp_path, "kafka:\n  local:\n    port: 70000\n"))
    assert "key 'kafka.local.port' has bad value 70000" in message
    assert "less than or equal to 65535" in message


def test_wrong_type_names_key(tmp_path: Path) -> None:
    message = error_for(write(tmp_path, "spark:\n  shuffle_partitions: many\n"))
    assert "key 'spark.shuffle_partitions' has bad value 'many'" in message
    assert "integer" in message


def test_choice_lists_allowed_values(tmp_path: Path) -> None:
    message = error_for(write(tmp_path, "spark:\n  log_level: LOUD\n"))
    assert "key 'spark.log_level' has bad value 'LOUD'" in message
    assert "'ERROR', 'WARN', 'INFO' or 'DEBUG'" in message


def test_bootstrap_must_have_ports(tmp_path: Path) -> None:
    message = error_for(write(tmp_path, "kafka:\n  bootstrap: broker1\n"))
    assert "key 'kafka.bootstrap' has bad value 'broker1'" in message
    assert "host:port" in message


def test_missing_required_key(tmp_path: Path) -> None:
    path = write(tmp_path, "kind: pipeline\ninput_topics: [a]\noutput_topic: b\n", "p.yaml")
    assert "key 'job' is required but missing" in error_for(path)


def test_unknown_kind(tmp_path: Path) -> None:
    message = error_for(write(tmp_path, "kind: banana\n", "x.yaml"))
    assert "key 'kind' has bad value 'banana'" in message
    assert "stack, scenario, pipeline, loadtest, api" in message


def test_kind_is_inferred_from_folder(tmp_path: Path) -> None:
    folder = tmp_path / "pipelines"
    folder.mkdir()
    path = write(folder, "job: sensors\ninput_topics: [a]\noutput_topic: b\n", "p.yaml")
    kind, _ = load_file(path)
    assert kind == "pipeline"


def test_missing_file(tmp_path: Path) -> None:
    assert "cannot read file" in error_for(tmp_path / "nope.yaml")


def test_environment_overrides_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, "spark:\n  master: local[2]\n")
    monkeypatch.setenv("STREAMSIM_KAFKA_BOOTSTRAP", "kafka1:9092,kafka2:9092")
    monkeypatch.setenv("STREAMSIM_SPARK_MASTER", "spark://head:7077")
    monkeypatch.setenv("STREAMSIM_API_PORT", "8100")
    stack = load_stack(path)
    assert stack.kafka.external
    assert stack.kafka.bootstrap_servers == "kafka1:9092,kafka2:9092"
    assert stack.spark.master == "spark://head:7077"
    assert stack.api.port == 8100


def test_bad_environment_value_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMSIM_KAFKA_PORT", "ninety")
    with pytest.raises(ConfigError) as info:
        load_stack(None)
    assert "environment variable STREAMSIM_KAFKA_PORT has bad value 'ninety'" in str(info.value)


def test_key_path_formats_list_indices() -> None:
    assert key_path(("kafka", "topics", 0, "partitions")) == "kafka.topics[0].partitions"
