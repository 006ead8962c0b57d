"""When batch work may start: only on capacity interactive traffic leaves idle.

A pure rule (no clock, no I/O) shared by the gateway's batch runner and the simulator. Batch
work starts a request only while nothing of a higher band waits in the flow queue, no
interactive request has had to wait or been refused for ``calm_s`` seconds, the fleet's
in-flight requests are under ``busy_fraction`` of its budget and batch itself holds under
``batch_fraction`` of it. Otherwise it *pauses*: nothing already running is stopped, nothing
new starts, and nothing is failed; it resumes once the rule holds again.

What counts as an interactive request having had to wait, or been refused, is
:func:`shows_load`: not one whose own prompt's prefill, on a replica with nothing queued,
already takes longer than the time it may be forecast to take (its TTFT SLO, or below the top
band ``band_headroom`` of it). No idle capacity could have placed it, so it says nothing about
interactive load. Counted, they kept batch paused through the diurnal troughs: on the flow
bench's day (2 × H100, Mooncake prompts) they were ~40% of the interactive requests that waited
or were refused in the quietest hours, and with them the rule found no calm at 62% of its looks
while the fleet held a third of its budget; a one-hour backlog was still unfinished when the
24 h window closed (bench/RESULTS.md).
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


def shows_load(service_s: float, budget_s: float) -> bool:
    """Whether an interactive request that had to wait, or was refused, shows interactive load
    (and so keeps batch work paused for ``calm_s``): True unless its own service — its
    prompt's prefill with nothing queued ahead, ``service_s`` — takes longer than the time it
    may be forecast to take, ``budget_s``. Such a request could not have been placed on an
    idle fleet either."""
    return service_s <= budget_s
