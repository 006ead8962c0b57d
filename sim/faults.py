"""Failures and stragglers, injected by schedule."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from placement.errors import InputError, read_text


@dataclass(frozen=True, slots=True, kw_only=True)
class Fault:
    """``kill`` a replica at ``at_s``, or ``slow`` it by ``factor`` (iteration times × factor)."""

    at_s: float
    replica: str
    kind: Literal["kill", "slow"]
    factor: float = 1.0


def faults_from_list(raw: Sequence[Any], *, source: str = "<faults>") -> tuple[Fault, ...]:
    """Parse ``[{at_s: 60, replica: h100-0, kind: kill}, {…, kind: slow, factor: 3}]``."""
    out: list[Fault] = []
    for i, item in enumerate(raw):
        where = f"faults.{i}"
        if not isinstance(item, dict):
            raise InputError("a fault must be a mapping", source=source, field=where)
        unknown = set(item) - {"at_s", "replica", "kind", "factor"}
        if unknown:
            raise InputError(
                f"unknown key(s) {sorted(unknown)}",
                source=source,
                field=where,
                expected="at_s, replica, kind, factor",
            )
        kind = item.get("kind")
        if kind not in ("kill", "slow"):
            raise InputError(
                f"kind is {kind!r}",
                source=source,
                field=f"{where}.kind",
                expected="'kill' or 'slow'",
            )
        try:
            at_s = float(item["at_s"])
            factor = float(item.get("factor", 1.0))
            replica = str(item["replica"])
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(
                f"missing or bad value ({exc})",
                source=source,
                field=where,
                expected="at_s: number, replica: id",
            ) from None
        if at_s < 0 or factor <= 0:
            raise InputError("at_s must be ≥ 0 and factor > 0", source=source, field=where)
        out.append(Fault(at_s=at_s, replica=replica, kind=kind, factor=factor))
    return tuple(out)


def load_faults(path: str | Path) -> tuple[Fault, ...]:
    """Read a fault schedule: a YAML list of ``{at_s, replica, kind[, factor]}``."""
    p = Path(path)
    text = read_text(p, "fault file")
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError:
        raise InputError("not valid YAML", source=str(p)) from None
    if not isinstance(raw, list):
        raise InputError(
            "a fault schedule must be a list",
            source=str(p),
            expected="- {at_s: 60, replica: h100-0, kind: kill}",
        )
    return faults_from_list(raw, source=str(p))
