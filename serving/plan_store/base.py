"""Where plans are published and shared between service processes, and where the credit
state survives a restart.

A store holds immutable plan versions and a pointer to the latest good one. ``put`` never
overwrites a version; ``latest`` only moves forward. ``next_version`` hands out versions so
that two processes solving at once cannot publish the same number, and never one at or below
``above``: a service passes its installed version, so an emptied store (a Redis flushed or
replaced, a plan directory wiped) cannot restart numbering below the plan it is routing by.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from placement.errors import InputError, PlacementError
from placement.plan import Plan


class PlanStoreError(PlacementError):
    """The plan store cannot be read or written (a version exists, the backend is down)."""


class CorruptPlan(PlanStoreError):
    """A stored plan does not parse (a truncated file, a foreign key): it stays unreadable."""


class PlanStore(Protocol):
    def next_version(self, *, above: int = 0) -> int:
        """A version no other writer of this store will use, greater than ``above`` and than
        every published version."""

    def put(self, plan: Plan) -> None:
        """Publish ``plan`` and make it the latest (if newer). Refuses an existing version."""

    def get(self, version: int) -> Plan | None:
        """The plan of ``version``, or None."""

    def latest(self) -> Plan | None:
        """The newest published plan, or None before the first."""

    def latest_version(self) -> int | None:
        """The newest published version (cheap: followers poll it)."""

    def save_credits(self, counters: Mapping[str, float]) -> None:
        """Persist the per-tenant credit counters."""

    def load_credits(self) -> dict[str, float]:
        """The persisted counters ({} when none)."""

    def save_tenancy(self, doc: Mapping[str, Any], *, version: int | None = None) -> int:
        """Persist the tenants document (tenants, classes, allowed models, key digests) as a
        new version (above every stored one), or exactly as ``version`` when given and not
        below the stored one (re-seeding an emptied store); returns the version stored."""

    def load_tenancy(self) -> StoredTenancy | None:
        """The persisted tenants document and its version (None when none was saved)."""

    def tenancy_version(self) -> int:
        """The stored tenants document's version (0: none; cheap: followers poll it)."""


@dataclass(frozen=True, slots=True)
class StoredTenancy:
    version: int
    doc: dict[str, Any]


def tenancy_doc(raw: object, *, source: str) -> StoredTenancy:
    """A persisted tenants document as read back: ``{"version": n, "doc": {...}}``."""
    if (
        not isinstance(raw, Mapping)
        or not isinstance(raw.get("version"), int)
        or not isinstance(raw.get("doc"), Mapping)
    ):
        raise InputError(
            "is not a stored tenants document",
            source=source,
            expected='{"version": N, "doc": {"tenants": {...}, "classes": {...}}}',
        )
    return StoredTenancy(int(raw["version"]), dict(raw["doc"]))


def credit_counters(raw: object, *, source: str) -> dict[str, float]:
    """Persisted credit counters as read back (a JSON object, a Redis hash): tenant → a finite
    number. Anything else is an :class:`InputError` naming ``source`` and the tenant, so a
    damaged state stops start-up with a message rather than a traceback."""
    if not isinstance(raw, Mapping):
        raise InputError(
            f"holds a {type(raw).__name__}, not the credit counters",
            source=source,
            expected='an object of tenant → counter, e.g. {"acme": 12.5}',
        )
    counters: dict[str, float] = {}
    for tenant, value in raw.items():
        name = tenant.decode() if isinstance(tenant, bytes) else str(tenant)
        try:
            number = float(value.decode() if isinstance(value, bytes) else value)
        except (TypeError, ValueError, UnicodeDecodeError):
            number = math.nan
        if not math.isfinite(number) or isinstance(value, bool):
            raise InputError(
                f"{value!r} is not a counter", source=source, field=name, expected="a number"
            )
        counters[name] = number
    return counters
