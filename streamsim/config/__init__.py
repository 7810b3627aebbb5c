"""Configuration: YAML files validated into pydantic models.

Example:
    >>> from streamsim.config import load_stack
    >>> stack = load_stack(None)          # defaults, then STREAMSIM_* environment overrides
    >>> stack.kafka.bootstrap_servers
    '127.0.0.1:9092'
"""

from streamsim.config.errors import ConfigError
from streamsim.config.loader import load_file, load_model, load_stack
from streamsim.config.stack import StackConfig

__all__ = ["ConfigError", "StackConfig", "load_file", "load_model", "load_stack"]
