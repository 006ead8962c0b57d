"""How every command reports a user's mistake: one line naming what is wrong, exit code 2."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

import typer

from placement.errors import PlacementError

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
