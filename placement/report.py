"""Printing tables and writing benchmark JSON, the same way for every benchmark."""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

# columns of a table printed to a pipe or a file, where no terminal sets the width: wide
# enough that a log keeps each row of a benchmark's table on one line
PIPE_WIDTH = 200


def _fmt(v: object) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return "—"
        return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"
    return str(v)


def console() -> Console:
    """A console as wide as the terminal it prints to (or ``$COLUMNS``); :data:`PIPE_WIDTH`
    wide when it prints to a pipe or a file. Tables printed on it should fold or wrap their
    cells (``overflow="fold"``) rather than cut them: a cut cell ends in an ellipsis."""
    out = Console()
    if out.is_terminal or "COLUMNS" in os.environ:
        return out
    return Console(width=PIPE_WIDTH)


def folding(table: Table) -> Table:
    """``table`` with every column folding a cell too long for it onto the next line (rich's
    default cuts it to an ellipsis, and a cut replica id or metric name reads as another)."""
    for column in table.columns:
        column.overflow = "fold"
    return table


def print_table(title: str, rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> None:
    table = Table(title=title, show_lines=False)
    for c in columns:
        table.add_column(
            c,
            justify="left"
            if c in ("policy", "hardware", "model", "phase", "source", "workload")
            else "right",
            overflow="fold",
        )
    for r in rows:
        table.add_row(*(_fmt(r.get(c, "")) for c in columns))
    console().print(table)


def _clean(obj: Any) -> Any:
    if isinstance(obj, float) and (math.isnan(obj) or math.isinf(obj)):
        return None
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    return obj


def write_json(path: Path, payload: dict[str, Any]) -> None:
    """Write atomically (temp file + rename); NaN and inf become null."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        json.dump(_clean(payload), f, indent=2)
    os.replace(tmp, path)
