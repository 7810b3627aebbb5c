"""`streamsim chaos`: kill a component of the real stack mid-run and account for every record.

- `report`: the `chaos --json` shape, and the exit status (`outcome`).
- `defaults`: per fault, the inputs and pace its defaults run (`plan`).
- `ledger`: what reached the topics, counted against the run's truth.
- `broker`: the broker faults (`broker`, `broker-of-3`) on a private local broker or cluster.
- `checkpoint`, `alerts`, `driver`: the `driver` fault (kill -9 a Spark job's driver mid-batch).
- `acks`, `endpoint`: the `endpoint` fault (kill -9 the fraud endpoint under load).
- `lake`: the `lake-full` fault (cards's lake unwritable mid-run, then writable).
- `slow`: the `slow-broker` fault (client quotas throttle the broker, then are lifted).
"""

from streamsim.chaos.broker import BROKER_FAULTS, run_broker_fault
from streamsim.chaos.report import ChaosReport

#: Every `--fault` value.
FAULTS = (*BROKER_FAULTS, "driver", "endpoint", "lake-full", "slow-broker")

__all__ = ["BROKER_FAULTS", "FAULTS", "ChaosReport", "run_broker_fault"]
