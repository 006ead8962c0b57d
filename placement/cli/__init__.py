"""The ``placement`` command: one typer app assembled from one module per capability.

The command modules import nothing back from here (what they share is in
:mod:`placement.cli.errors`), so the CLI is the top of the layers and no circle.
"""

from __future__ import annotations

import typer

from placement.cli import bench, emulate, plan, retrain, serve, telemetry, train, whatif

app = typer.Typer(
    help="Placement service for LLM inference fleets.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(serve.app)
app.add_typer(emulate.app)
app.add_typer(train.app)
app.add_typer(retrain.app)
app.add_typer(whatif.app)
app.add_typer(train.models_app, name="models")
app.add_typer(plan.app, name="plan")
app.add_typer(telemetry.app, name="telemetry")
app.add_typer(bench.app, name="bench")

__all__ = ["app"]
