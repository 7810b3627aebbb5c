"""The simulation engine: SimPy time, device clocks, delivery faults, pacing and sinks.

It runs a scenario built by the scenario catalog, which also runs one from its config:

    from scenarios.catalog import run_scenario
    from simulators.sinks import JsonlSink
    summary = run_scenario(config, JsonlSink("out"), events=100_000, speed="max")
"""

from simulators.engine import Engine, Progress, RunSummary
from simulators.scenario import Scenario

__all__ = ["Engine", "Progress", "RunSummary", "Scenario"]
