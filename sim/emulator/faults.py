"""Faults one emulated replica can be told to show, by flag or through the admin endpoint.

- ``stopped``: the replica is down: its port refuses connections, requests in flight are cut
  off, its ``/metrics`` cannot be scraped;
- ``slowdown``: every engine iteration takes ``slowdown`` times as long (a straggler);
- ``fail_rate`` of requests are answered at once with HTTP ``fail_status`` (a 5xx by default);
- ``drop_rate`` of streamed requests lose their connection after ``drop_after_tokens`` tokens
  (half their output when 0), without the closing events.

The shape is what the llm-d inference simulator offers (failure-injection rate and status,
timing scale), written for this emulator.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from placement.errors import InputError

FIELDS = ("stopped", "slowdown", "fail_rate", "fail_status", "drop_rate", "drop_after_tokens")


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaFaults:
    stopped: bool = False
    slowdown: float = 1.0
    fail_rate: float = 0.0
    fail_status: int = 500
    drop_rate: float = 0.0
    drop_after_tokens: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def updated(self, raw: Any, *, source: str = "faults") -> ReplicaFaults:
        """These faults with the fields of ``raw`` (a JSON object) changed, validated."""
        if not isinstance(raw, dict):
            raise InputError("faults must be an object", source=source, expected=", ".join(FIELDS))
        unknown = sorted(set(raw) - set(FIELDS))
        if unknown:
            raise InputError(
                f"unknown field(s) {unknown}", source=source, expected=", ".join(FIELDS)
            )
        changes: dict[str, Any] = {}
        for name, value in raw.items():
            changes[name] = _check(name, value, source)
        return replace(self, **changes)


def _check(name: str, value: Any, source: str) -> Any:
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if name == "stopped":
        if not isinstance(value, bool):
            raise InputError("must be true or false", source=source, field=name)
        return value
    if name == "slowdown":
        if not number or value <= 0:
            raise InputError("must be a number > 0", source=source, field=name)
        return float(value)
    if name in ("fail_rate", "drop_rate"):
        if not number or not 0 <= value <= 1:
            raise InputError("must be a share in 0..1", source=source, field=name)
        return float(value)
    if name == "fail_status":
        if not isinstance(value, int) or isinstance(value, bool) or not 400 <= value <= 599:
            raise InputError("must be an HTTP error status (400..599)", source=source, field=name)
        return value
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InputError("must be an integer ≥ 0", source=source, field=name)
    return value
