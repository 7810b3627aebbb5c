"""The simulation engine: SimPy time, device clocks, delivery faults, pacing and sinks.

>>> from simulators import run_scenario
>>> from simulators.sinks import JsonlSink
>>> summary = run_scenario(config, JsonlSink("out"), events=100_000, speed="max")
"""

from simulators.engine import Engine, Progress, RunSummary, run_scenario

__all__ = ["Engine", "Progress", "RunSummary", "run_scenario"]
