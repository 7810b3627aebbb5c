"""`core.kafka.reader` without a broker: a cluster that does not answer is a clear error."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

import core.kafka.reader
from core.config import StackConfig
from core.errors import StreamsimError
from core.kafka.reader import read_topic


class Silent:
    def list_topics(self, timeout: float) -> Any:
        raise KafkaException(KafkaError(KafkaError._TRANSPORT, "Broker transport failure"))


def test_a_cluster_that_does_not_answer_is_named_with_what_to_do(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(core.kafka.reader, "admin_client", lambda *a, **k: Silent())
    stack = StackConfig.model_validate({"kafka": {"bootstrap": "127.0.0.1:19999"}})
    with pytest.raises(StreamsimError) as caught:
        read_topic(stack, "metrics")
    message = str(caught.value)
    assert "cannot read metrics" in message and "127.0.0.1:19999" in message
    assert "Broker transport failure" in message and "streamsim kafka up" in message
