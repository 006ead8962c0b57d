"""``placement train`` and ``placement models`` (thin: parse options, call train/promote, print)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from placement.cli.errors import user_errors
from training.tracking import DEFAULT_EXPERIMENT, LATENCY_MODEL, THROUGHPUT_MODEL

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from training.train import TrainResult

app = typer.Typer()
models_app = typer.Typer(
    help="Registered predictor versions: list them, promote one to champion.",
    no_args_is_help=True,
)

# the held-out metrics that describe each registered model (a run logs more: per accelerator,
# pinball losses; the MLflow UI shows them all)
LATENCY_METRICS = ("ttft.mape_p50", "ttft.coverage_p95", "tpot.mape_p50", "tpot.coverage_p95")
THROUGHPUT_METRICS = ("throughput.mape",)
MODEL_METRICS = {LATENCY_MODEL: LATENCY_METRICS, THROUGHPUT_MODEL: THROUGHPUT_METRICS}
BASELINE = "baseline."  # prefix of the roofline baseline's metrics in a run
ABSENT = "—"
UNBOUNDED_WIDTH = 10_000


def _value(metrics: Mapping[str, float], key: str) -> str:
    value = metrics.get(key)
    return ABSENT if value is None or not math.isfinite(value) else f"{value:.3f}"


def _has_values(metrics: Mapping[str, float], keys: Sequence[str], prefix: str = "") -> bool:
    return any(_value(metrics, prefix + key) != ABSENT for key in keys)


def _metrics_table(
    title: str, labels: Sequence[str], keys: Sequence[str], *, lines: bool = False
) -> Table:
    """A table of held-out metrics: the ``labels`` columns say which row, then one column per
    metric headed by its MLflow name broken after the target (``ttft.`` / ``coverage_p95``),
    narrow enough for a terminal. Cells fold rather than end in an ellipsis."""
    from rich.table import Table

    table = Table(title=title, show_lines=lines)
    for label in labels:
        table.add_column(label, overflow="fold")
    for key in keys:
        target, _, name = key.partition(".")
        table.add_column(f"{target}.\n{name}", justify="right", overflow="fold")
    return table


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
    from placement.report import console as make_console
    from training.tracking import mlflow_warnings_only, tracking_uri
    from training.train import train

    mlflow_warnings_only()
    console = make_console()
    with console.status("training") as status:
        result = train(
            telemetry,
            experiment=experiment,
            train_fraction=train_fraction,
            measurements=measurements,
            progress=status.update,
        )
    print_accuracy(console, result)
    console.print(
        f"registered {LATENCY_MODEL} v{result.latency_version} and {THROUGHPUT_MODEL} "
        f"v{result.throughput_version} in {tracking_uri()}",
        highlight=False,
    )
    console.print(f"promote with: placement models promote --candidate {result.latency_version}")


def print_accuracy(console: Console, result: TrainResult) -> None:
    """The run's held-out accuracy: the latency predictor's TTFT/TPOT metrics beside the
    roofline baseline's (the baseline's row only when it was scored), then the throughput
    predictor's own metric."""
    metrics = result.metrics
    table = _metrics_table(
        f"held-out accuracy (run {result.run_id})", ("model",), LATENCY_METRICS, lines=True
    )
    table.add_row(
        f"{LATENCY_MODEL} v{result.latency_version}",
        *(_value(metrics, k) for k in LATENCY_METRICS),
    )
    baseline = _has_values(metrics, LATENCY_METRICS, BASELINE)
    if baseline:
        table.add_row(
            "roofline baseline", *(_value(metrics, BASELINE + k) for k in LATENCY_METRICS)
        )
    console.print(table)
    if not baseline:
        console.print(
            "no roofline baseline row: the run logged no baseline metric (no held-out request "
            "with an observed TTFT or TPOT to score it on)"
        )
    throughput = _value(metrics, "throughput.mape")
    console.print(
        f"{THROUGHPUT_MODEL} v{result.throughput_version}: throughput.mape {throughput}"
        if throughput != ABSENT
        else f"{THROUGHPUT_MODEL} v{result.throughput_version}: no throughput.mape (no "
        "held-out row has a replica generating tokens)",
        highlight=False,
    )


@models_app.command("promote")
@user_errors
def promote_command(
    candidate: Annotated[str, typer.Option(help="version of placement-latency")],
    telemetry: Annotated[
        Path | None, typer.Option(help="telemetry store (default: the one the run logged)")
    ] = None,
) -> None:
    """Make the candidate champion if it is at least as good on the same held-out rows."""
    from placement.report import console as make_console
    from training.promote import promote
    from training.tracking import mlflow_warnings_only

    mlflow_warnings_only()
    console = make_console()
    with console.status(f"scoring version {candidate} against the champion"):
        decision = promote(candidate, telemetry_dir=telemetry)
    if decision.candidate:
        table = _metrics_table("held-out metrics", ("version",), LATENCY_METRICS, lines=True)
        table.add_row(
            f"candidate v{decision.candidate_version}",
            *(_value(decision.candidate, k) for k in LATENCY_METRICS),
        )
        if decision.champion:
            table.add_row(
                f"champion v{decision.champion_version}",
                *(_value(decision.champion, k) for k in LATENCY_METRICS),
            )
        console.print(table)
    style = "green" if decision.promoted else "yellow"
    console.print(f"[{style}]{'promoted' if decision.promoted else 'not promoted'}[/]: ", end="")
    console.print(decision.reason, markup=False, highlight=False)


@models_app.command("list")
@user_errors
def list_command() -> None:
    """Registered versions with their aliases and held-out metrics."""
    from placement.report import console as make_console
    from training.tracking import connect, mlflow_warnings_only

    mlflow_warnings_only()
    client = connect()
    # aliases live on the registered model: version search leaves ModelVersion.aliases empty
    aliases = {m.name: _aliases_by_version(m.aliases) for m in client.search_registered_models()}
    console = make_console()
    count = 0
    for name, keys in MODEL_METRICS.items():
        versions: list[Any] = list(client.search_model_versions(f"name = '{name}'"))
        rows: list[list[str]] = []
        for mv in sorted(versions, key=lambda v: int(v.version), reverse=True):
            metrics = dict(client.get_run(mv.run_id).data.metrics) if mv.run_id else {}
            held = aliases.get(name, {}).get(str(mv.version), [])
            rows.append(
                [
                    " ".join([str(mv.version), *(f"@{a}" for a in held)]),
                    _created(mv.creation_timestamp),
                    str(mv.run_id or "")[:8],
                    *(_value(metrics, k) for k in keys),
                ]
            )
        if rows:
            _print_versions(console, name, keys, rows)
        count += len(rows)
    if count == 0:
        typer.echo("no registered versions yet; train one with `placement train`")


def _print_versions(
    console: Console, name: str, keys: Sequence[str], rows: Sequence[Sequence[str]]
) -> None:
    """One registered model's versions (version and aliases, created, run, metrics); the run
    column is the first to go when the table would not fit the terminal."""
    table = _metrics_table(name, ("version", "created", "run"), keys)
    for row in rows:
        table.add_row(*row)
    if _natural_width(console, table) <= console.width:
        console.print(table)
        return
    table = _metrics_table(name, ("version", "created"), keys)
    for row in rows:
        table.add_row(*row[:2], *row[3:])
    console.print(table)
    console.print(f"(run ids left out to fit {console.width} columns)", highlight=False)


def _natural_width(console: Console, table: Table) -> int:
    """The width ``table`` takes when nothing wraps (measured as if the console were wide)."""
    unbounded = console.options.update_width(UNBOUNDED_WIDTH)
    return console.measure(table, options=unbounded).maximum


def _aliases_by_version(aliases: Mapping[str, Any] | None) -> dict[str, list[str]]:
    """``{alias: version}`` as MLflow keeps it on a registered model → ``{version: [alias]}``."""
    out: dict[str, list[str]] = {}
    for alias, version in sorted((aliases or {}).items()):
        out.setdefault(str(version), []).append(alias)
    return out


def _created(timestamp_ms: int | None) -> str:
    """The day a version was registered (UTC)."""
    from datetime import UTC, datetime

    if timestamp_ms is None:
        return ""
    return datetime.fromtimestamp(timestamp_ms / 1000, tz=UTC).strftime("%Y-%m-%d")
