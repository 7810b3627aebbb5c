"""Stack files for child processes, without Kafka client secrets.

`streamsim demo` and `streamsim bench` hand their children (the endpoint, the simulator) the
stack as a YAML file. Secret `kafka.client` settings (`sasl.password`, ...) stay out of that
file: the child gets them in `$STREAMSIM_KAFKA_CLIENT`, which every stack load merges back, as
the panel's run directories do.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import orjson
import yaml

from core.config import StackConfig
from core.config.stack import KAFKA_CLIENT_ENV, split_client_secrets


def write_stack_file(
    stack: StackConfig, path: Path, env: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Write `stack` to `path` without its secret client settings; the environment (`env`,
    default this process's) a child that reads `path` needs to get them back."""
    data, client_secrets = split_client_secrets(stack)
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    child = dict(os.environ if env is None else env)
    if client_secrets:
        child[KAFKA_CLIENT_ENV] = orjson.dumps(client_secrets).decode()
    return child
