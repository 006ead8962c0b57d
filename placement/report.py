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


def _fmt(v: object) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return "—"
        return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"
    return str(v)


def print_table(title: str, rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> None:
    table = Table(title=title, show_lines=False)
    for c in columns:
        table.add_column(
            c,
            justify="left"
            if c in ("policy", "hardware", "model", "phase", "source", "workload")
            else "right",
        )
    for r in rows:
        table.add_row(*(_fmt(r.get(c, "")) for c in columns))
    Console(width=200).print(table)


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
