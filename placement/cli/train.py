"""``placement train`` and ``placement models`` (thin: parse options, call train/promote, print)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from placement.cli.errors import user_errors
from training.tracking import DEFAULT_EXPERIMENT

app = typer.Typer()
models_app = typer.Typer(
    help="Registered predictor versions: list them, promote one to champion.",
    no_args_is_help=True,
)

KEY_METRICS = ("ttft.mape_p50", "ttft.coverage_p95", "tpot.mape_p50", "tpot.coverage_p95")


def _metric_row(metrics: dict[str, float], prefix: str = "") -> list[str]:
    return [f"{metrics[prefix + k]:.3f}" if prefix + k in metrics else "—" for k in KEY_METRICS]


@app.command("train")
@user_errors
def train_command(
    telemetry: Annotated[Path, typer.Option(help="telemetry store folder")],
    experiment: Annotated[str, typer.Option(help="MLflow experiment")] = DEFAULT_EXPERIMENT,
    train_fraction: Annotated[
        float, typer.Option(help="earliest share of requests to train on; the rest is held out")
    ] = 0.7,
    measurements: Annotated[
        str | None,
        typer.Option(help="also train on measured rows: 'splitwise' or a CSV in its columns"),
    ] = None,
) -> None:
    """Train the latency/throughput predictors, log the run to MLflow, register new versions."""
    from rich.console import Console
    from rich.table import Table

    from training.tracking import tracking_uri
    from training.train import train

    console = Console()
    with console.status("training") as status:
        result = train(
            telemetry,
            experiment=experiment,
            train_fraction=train_fraction,
            measurements=measurements,
            progress=status.update,
        )
    table = Table(title=f"held-out accuracy (run {result.run_id})")
    table.add_column("model")
    for key in KEY_METRICS:
        table.add_column(key, justify="right")
    table.add_row("predictor", *_metric_row(result.metrics))
    table.add_row("roofline baseline", *_metric_row(result.metrics, "baseline."))
    console.print(table)
    console.print(
        f"registered placement-latency v{result.latency_version} and placement-throughput "
        f"v{result.throughput_version} in {tracking_uri()}"
    )
    console.print(f"promote with: placement models promote --candidate {result.latency_version}")


@models_app.command("promote")
@user_errors
def promote_command(
    candidate: Annotated[str, typer.Option(help="version of placement-latency")],
    telemetry: Annotated[
        Path | None, typer.Option(help="telemetry store (default: the one the run logged)")
    ] = None,
) -> None:
    """Make the candidate champion if it is at least as good on the same held-out rows."""
    from rich.console import Console
    from rich.table import Table

    from training.promote import promote

    console = Console()
    with console.status(f"scoring version {candidate} against the champion"):
        decision = promote(candidate, telemetry_dir=telemetry)
    if decision.candidate:
        table = Table(title="held-out metrics")
        table.add_column("version")
        for key in KEY_METRICS:
            table.add_column(key, justify="right")
        table.add_row(f"candidate v{decision.candidate_version}", *_metric_row(decision.candidate))
        if decision.champion:
            table.add_row(f"champion v{decision.champion_version}", *_metric_row(decision.champion))
        console.print(table)
    style = "green" if decision.promoted else "yellow"
    console.print(f"[{style}]{'promoted' if decision.promoted else 'not promoted'}[/]: ", end="")
    console.print(decision.reason, markup=False, highlight=False)


@models_app.command("list")
@user_errors
def list_command() -> None:
    """Registered versions with their aliases and held-out metrics."""
    from rich.console import Console
    from rich.table import Table

    from training.tracking import LATENCY_MODEL, THROUGHPUT_MODEL, connect

    client = connect()
    table = Table(title="registered predictors")
    for column in ("model", "version", "aliases", "created", "run"):
        table.add_column(column)
    for key in KEY_METRICS:
        table.add_column(key, justify="right")
    count = 0
    for name in (LATENCY_MODEL, THROUGHPUT_MODEL):
        versions: list[Any] = list(client.search_model_versions(f"name = '{name}'"))
        for mv in sorted(versions, key=lambda v: int(v.version), reverse=True):
            metrics = dict(client.get_run(mv.run_id).data.metrics) if mv.run_id else {}
            table.add_row(
                name,
                str(mv.version),
                ",".join(mv.aliases or []),
                _created(mv.creation_timestamp),
                str(mv.run_id or "")[:8],
                *_metric_row(metrics),
            )
            count += 1
    Console(width=200).print(table)
    if count == 0:
        typer.echo("no registered versions yet; train one with `placement train`")


def _created(timestamp_ms: int | None) -> str:
    from datetime import UTC, datetime

    if timestamp_ms is None:
        return ""
    return datetime.fromtimestamp(timestamp_ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M")
