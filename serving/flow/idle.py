"""When batch work may start: only on capacity interactive traffic leaves idle.

A pure rule (no clock, no I/O) shared by the gateway's batch runner and the simulator. Batch
work starts a request only while nothing of a higher band waits in the flow queue, no
interactive request has had to wait or been refused for ``calm_s`` seconds, the fleet's
in-flight requests are under ``busy_fraction`` of its budget and batch itself holds under
``batch_fraction`` of it. Otherwise it *pauses*: nothing already running is stopped, nothing
new starts, and nothing is failed; it resumes once the rule holds again.
"""

from __future__ import annotations

from dataclasses import dataclass

from placement.errors import InputError


@dataclass(frozen=True, slots=True, kw_only=True)
class IdlePolicy:
    busy_fraction: float = 0.6
    batch_fraction: float = 0.5
    calm_s: float = 10.0

    def __post_init__(self) -> None:
        for name in ("busy_fraction", "batch_fraction"):
            value = getattr(self, name)
            if not 0 < value <= 1:
                raise InputError("must be within (0, 1]", field=name)
        if not self.calm_s >= 0:
            raise InputError("must be ≥ 0", field="calm_s")

    def may_start(
        self,
        *,
        waiting_above: int,
        in_flight: int,
        batch_in_flight: int,
        budget: int,
        quiet_s: float = float("inf"),
    ) -> bool:
        """May one more batch request start now? ``quiet_s``: seconds since an interactive
        request last had to wait or was refused."""
        if waiting_above > 0 or budget <= 0 or quiet_s < self.calm_s:
            return False
        if in_flight + 1 > self.busy_fraction * budget:
            return False
        return batch_in_flight + 1 <= max(1.0, self.batch_fraction * budget)
