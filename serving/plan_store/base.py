"""Where plans are published and shared between service processes, and where the credit
state survives a restart.

A store holds immutable plan versions and a pointer to the latest good one. ``put`` never
overwrites a version; ``latest`` only moves forward. ``next_version`` hands out versions so
that two processes solving at once cannot publish the same number, and never one at or below
``above``: a service passes its installed version, so an emptied store (a Redis flushed or
replaced, a plan directory wiped) cannot restart numbering below the plan it is routing by.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from placement.errors import PlacementError
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
