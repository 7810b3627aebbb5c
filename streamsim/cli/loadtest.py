"""`streamsim loadtest LOADTEST_YAML`: an open-model load test against the fraud endpoint
(`target: http`), a Kafka topic and a Spark job (`target: kafka`), or both (`target: scenario`).

Exit codes: 0 all SLOs met, 1 an SLO failed (or the target could not be reached), 2 bad config.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from core.config import load_model
from streamsim.cli.common import ConfigOpt, JsonOpt, emit, err_console, stack_from


def loadtest(
    file: Annotated[
        Path, typer.Argument(help="Load-test YAML (config/loadtests/*.yaml).", dir_okay=False)
    ],
    config: ConfigOpt = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Folder for report.json, latency.hdr and the charts. Default: "
            "<dirs.data>/loadtests/<name>-<UTC timestamp>/.",
            file_okay=False,
        ),
    ] = None,
    progress_file: Annotated[
        Path | None,
        typer.Option(
            "--progress",
            help="Write the figures so far (achieved rate, latency p50/p95/p99) to this JSON "
            "file about once a second, for a watcher such as the panel API.",
            dir_okay=False,
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Send requests at the file's arrival rate (open model), time each from its intended send
    time, check the SLOs, write a JSON report and charts. Exits 1 when an SLO fails."""
    from streamsim.loadtest.config import HttpTarget, KafkaTarget, LoadTestConfig
    from streamsim.loadtest.live import LiveFile
    from streamsim.loadtest.recorder import Recorder
    from streamsim.loadtest.report import summary
    from streamsim.loadtest.run import run_loadtest

    stack = stack_from(config)
    cfg = load_model(LoadTestConfig, file)
    name = cfg.name or file.stem
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    folder = out or Path(stack.dirs.data) / "loadtests" / f"{name}-{stamp}"

    target = cfg.target
    if isinstance(target, HttpTarget):
        against = f"{target.base_url(stack)}{target.path}"
    elif isinstance(target, KafkaTarget):
        against = f"kafka topic {target.topic or '(the scenario topic)'}"
    else:
        against = f"{target.http.target.base_url(stack)} and kafka"
    err_console.print(
        f"load test {name}: {cfg.load.type} load, {cfg.warmup_s:g} s warm-up + "
        f"{cfg.duration_s:g} s against {against}",
        highlight=False,
    )
    live = None if progress_file is None else LiveFile(progress_file, cfg.warmup_s)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("finished {task.fields[finished]:,}"),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
    ) as bar:
        task = bar.add_task("sent", total=None, finished=0)

        def progress(sent: int, finished: int, total: int, rec: Recorder) -> None:
            bar.update(task, completed=sent, total=total, finished=finished)
            if live is not None:
                live(sent, finished, total, rec)

        report = run_loadtest(cfg, stack, name, folder, progress)
    if live is not None:
        live.done()

    if "paths" in report:
        text = "\n".join(summary(r) for r in report["paths"].values())
        text += "\n" + ("[green]all SLOs met[/]" if report["ok"] else "[bold red]SLO failed[/]")
    else:
        text = summary(report)
    emit(report, as_json, text + f"\nreport and charts: {folder}")
    if not report["ok"]:
        raise typer.Exit(1)
