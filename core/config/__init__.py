"""Configuration: YAML files validated into pydantic models.

Example:
    >>> from core.config import load_stack
    >>> stack = load_stack(None)          # defaults, then STREAMSIM_* environment overrides
    >>> stack.kafka.bootstrap_servers
    '127.0.0.1:9092'
"""

from core.config.errors import ConfigError
from core.config.loader import load_model, load_stack, read_yaml
from core.config.stack import StackConfig

__all__ = ["ConfigError", "StackConfig", "load_model", "load_stack", "read_yaml"]
