"""Typed reading of a plugin's parameters from a profile, every error naming file and field."""

from __future__ import annotations

import math
from typing import Any

from placement.errors import InputError


class Params:
    """The parameters of one plugin (``raw``), found at ``field`` in ``source``.

    Read each with :meth:`number` / :meth:`integer` / :meth:`boolean`, then call
    :meth:`finish`, which refuses any parameter nobody read (a misspelt name is an error).
    """

    def __init__(self, raw: dict[str, Any], *, source: str, field: str) -> None:
        self._raw = raw
        self._read: set[str] = set()
        self.source = source
        self.field = field

    def _error(self, name: str, message: str, expected: str) -> InputError:
        return InputError(
            message, source=self.source, field=f"{self.field}.{name}", expected=expected
        )

    def number(
        self, name: str, default: float, *, minimum: float = -math.inf, above: bool = False
    ) -> float:
        """A real number ≥ ``minimum`` (> it when ``above``)."""
        self._read.add(name)
        value = self._raw.get(name, default)
        bound = f"a number {'>' if above else '>='} {minimum:g}"
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self._error(name, f"got {value!r}", bound)
        if not math.isfinite(value) or value < minimum or (above and value == minimum):
            raise self._error(name, f"got {value!r}", bound)
        return float(value)

    def optional_number(self, name: str, *, above: float) -> float | None:
        """A number > ``above``, or null (the feature off)."""
        self._read.add(name)
        if self._raw.get(name) is None:
            return None
        return self.number(name, 0.0, minimum=above, above=True)

    def integer(self, name: str, default: int, *, minimum: int) -> int:
        self._read.add(name)
        value = self._raw.get(name, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self._error(name, f"got {value!r}", f"an integer >= {minimum}")
        return value

    def boolean(self, name: str, default: bool) -> bool:
        self._read.add(name)
        value = self._raw.get(name, default)
        if not isinstance(value, bool):
            raise self._error(name, f"got {value!r}", "true or false")
        return value

    def finish(self) -> None:
        unknown = sorted(set(self._raw) - self._read)
        if unknown:
            known = ", ".join(sorted(self._read)) or "none"
            raise self._error(unknown[0], "unknown parameter", f"one of: {known}")
