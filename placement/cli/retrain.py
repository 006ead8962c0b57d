"""``placement retrain``: a candidate on the latest window, promoted only if as good."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from placement.cli.errors import user_errors

app = typer.Typer()


@app.command("retrain")
@user_errors
def retrain(
    telemetry: Annotated[Path, typer.Option(help="telemetry store (Parquet, by day)")],
    window_hours: Annotated[
        float, typer.Option(min=0.0, help="hours of the latest telemetry to learn from (0: all)")
    ] = 24.0,
    experiment: Annotated[str, typer.Option(help="MLflow experiment")] = "placement-predictors",
) -> None:
    """Train a candidate on the latest window, score it and the champion on the same later
    held-out rows, and move @champion only if the candidate is at least as good."""
    from training.retrain import retrain as run

    result = run(
        telemetry,
        window_s=window_hours * 3600.0 if window_hours > 0 else None,
        experiment=experiment,
        progress=lambda message: typer.echo(message, err=True),
    )
    d = result.decision
    verdict = "promoted" if d.promoted else "kept the champion"
    typer.echo(f"{verdict}: {d.reason}")
