"""The `streamsim` command line. Each subcommand lives in its own module."""

from __future__ import annotations

import sys

import typer

from core.config import ConfigError
from core.errors import StreamsimError
from streamsim.cli import (
    api,
    bench,
    chaos,
    config,
    contracts,
    demo,
    doctor,
    evaluate,
    kafka,
    lab,
    pipeline,
    simulate,
)
from streamsim.cli import loadtest as loadtest_cli
from streamsim.cli import ui as ui_cli
from streamsim.cli import verify as verify_cli
from streamsim.cli.common import fail

app = typer.Typer(
    name="streamsim",
    help="IoT and fraud stream simulator with a reference Kafka + Spark pipeline.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(kafka.app, name="kafka")
app.add_typer(config.app, name="config")
app.add_typer(pipeline.app, name="pipeline")
app.add_typer(bench.app, name="bench")
app.add_typer(lab.app, name="lab")
app.command()(doctor.doctor)
app.command(name="api")(api.api)
app.command(name="ui")(ui_cli.ui)
app.command()(demo.demo)
app.command()(evaluate.evaluate)
app.command()(simulate.simulate)
app.command(name="verify-stream")(verify_cli.verify_stream)
app.command(name="loadtest")(loadtest_cli.loadtest)
app.command()(chaos.chaos)
app.command()(contracts.contracts)


def main() -> None:
    try:
        app()
    except ConfigError as exc:
        raise SystemExit(_exit_code(exc, 2)) from None
    except StreamsimError as exc:
        raise SystemExit(_exit_code(exc, 1)) from None
    except KeyboardInterrupt:
        sys.exit(130)


def _exit_code(exc: Exception, code: int) -> int:
    fail(str(exc), code)
    return code
