"""The ``placement`` command: one typer app, one sub-app per capability."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

import typer

from placement.errors import PlacementError

app = typer.Typer(
    help="Placement service for LLM inference fleets.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
bench_app = typer.Typer(
    help="Benchmarks: each prints a table and writes JSON (--out).", no_args_is_help=True
)
app.add_typer(bench_app, name="bench")

F = TypeVar("F", bound=Callable[..., Any])


def user_errors(fn: F) -> F:
    """Turn a PlacementError into a one-line message and exit code 2, never a traceback."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except PlacementError as exc:
            typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
            sys.exit(2)

    return wrapper  # type: ignore[return-value]


def _register() -> None:
    # Each capability registers its commands on import; kept here so `app` is the one entry.
    from bench import commands  # noqa: F401
    from placement.plan import commands as plan_commands  # noqa: F401
    from placement.whatif import commands as whatif_commands  # noqa: F401
    from serving import commands as serving_commands  # noqa: F401
    from training import commands as training_commands  # noqa: F401
    from training.telemetry import commands as telemetry_commands  # noqa: F401


_register()
