"""``placement telemetry`` subcommands (thin: parse options, call the producers and the store)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer

from placement.cli.errors import user_errors
from placement.errors import InputError

app = typer.Typer(
    help="Telemetry: per-request records and per-replica samples, stored as Parquet.",
    no_args_is_help=True,
)

DEFAULT_START = "2026-01-01T00:00:00+00:00"


def parse_start(text: str) -> datetime:
    """An ISO 8601 time with a zone (``Z`` or ``+00:00``)."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        raise InputError(
            f"'{text}' is not an ISO time with a zone",
            field="--start",
            expected="e.g. 2026-01-01T00:00:00Z",
        )
    return moment


@app.command("export")
@user_errors
def export(
    out: Annotated[Path, typer.Option(help="telemetry store folder (created if missing)")],
    workload: Annotated[
        str, typer.Option(help="mooncake, azure-conv, azure-code, servegen, mixed, synthetic")
    ] = "mooncake",
    fleet: Annotated[Path, typer.Option(help="fleet YAML")] = Path("data/fleets/h100x8.yaml"),
    load: Annotated[float, typer.Option(help="offered load, × nominal capacity")] = 1.0,
    duration: Annotated[float | None, typer.Option(help="seconds of trace to use")] = None,
    policy: Annotated[str, typer.Option(help="routing policy")] = "least_outstanding",
    interval: Annotated[float, typer.Option(help="replica sample interval, s")] = 1.0,
    seed: Annotated[int, typer.Option()] = 0,
    start: Annotated[str, typer.Option(help="UTC time of simulated t = 0")] = DEFAULT_START,
) -> None:
    """Simulate a run and append its request records and replica samples to a store."""
    from rich.progress import Progress

    from placement.domain.fleet import load_fleet
    from sim.workloads.registry import load_workload
    from training.telemetry.simulated import simulate_for_telemetry, telemetry_frames
    from training.telemetry.store import write_telemetry

    t0 = parse_start(start)
    wl = load_workload(workload, seed=seed, duration_s=duration)
    fl = load_fleet(fleet)
    with Progress(transient=True) as progress:
        task = progress.add_task(f"simulating {workload} @ load {load}", total=len(wl))
        result = simulate_for_telemetry(
            wl,
            fl,
            load=load,
            policy=policy,
            sample_interval_s=interval,
            seed=seed,
            progress=lambda n: progress.update(task, completed=n),
        )
        progress.update(task, completed=len(wl))
    requests, samples = telemetry_frames(result, start=t0)
    times = [t for t in (requests["arrival_time"], samples["time"]) if len(t)]
    if out.exists() and times:
        _refuse_overlap(out, min(t.min() for t in times), max(t.max() for t in times))
    files = write_telemetry(out, requests, samples)
    served = int((requests["error"] == "").sum())
    typer.echo(
        f"{len(requests)} requests ({served} served) and {len(samples)} replica samples "
        f"from {requests['arrival_time'].min()} → {out} ({len(files)} files)"
    )


def _refuse_overlap(store: Path, first: datetime, last: datetime) -> None:
    """Two runs in one time window would mix replicas of the same names: refuse."""
    from training.telemetry.store import summarise_store

    for day in summarise_store(store):
        if day.first <= last and first <= day.last:
            raise InputError(
                f"already holds {day.table} from {day.first} to {day.last}, which overlaps "
                f"this run ({first} to {last})",
                source=str(store),
                expected="another --start or another --out",
            )


@app.command("show")
@user_errors
def show(store: Annotated[Path, typer.Argument(help="telemetry store folder")]) -> None:
    """Rows per table and UTC day, with the time range each covers."""
    from placement.report import print_table
    from training.telemetry.store import summarise_store

    days = summarise_store(store)
    rows = [
        {
            "table": d.table,
            "date": d.date,
            "rows": d.rows,
            "first": d.first.isoformat(),
            "last": d.last.isoformat(),
        }
        for d in days
    ]
    print_table(f"telemetry in {store}", rows, ("table", "date", "rows", "first", "last"))
    if not rows:
        typer.echo("no telemetry yet")
