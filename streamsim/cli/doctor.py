"""`streamsim doctor`."""

from __future__ import annotations

import typer

from streamsim.cli.common import ConfigOpt, JsonOpt, console, emit, stack_from
from streamsim.doctor import java_info, run_checks


def doctor(config: ConfigOpt = None, as_json: JsonOpt = False) -> None:
    """Check Java, the Kafka jars, the Spark connector, ports, disk and the broker; print fixes."""
    checks = run_checks(stack_from(config))
    ok = all(c["ok"] for c in checks.values())
    if not as_json:
        for name, c in checks.items():
            mark = "[green]ok[/]  " if c["ok"] else "[red]FAIL[/]"
            fix = f"\n       fix: [bold]{c['fix']}[/]" if not c["ok"] and c["fix"] else ""
            console.print(f"{mark} {name:16} {c['detail']}{fix}", highlight=False)
    emit({"ok": ok, "java": java_info(), "checks": checks}, as_json)
    if not ok:
        raise typer.Exit(1)
