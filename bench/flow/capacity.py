"""The fleet's capacity at SLO for the flow-control traffic: what "1.5× overload" is 1.5× of.

The trace's *nominal* load (:mod:`sim.capacity`) prices a request by its prefill and decode
alone, with no prefix-cache hits and no queueing; on Mooncake, whose conversations share
long prefixes, the fleet serves more than that within the SLO. So the overload is set against
the capacity measured here instead: the interactive traffic alone (no batch backlog) on the
**head** of the trace, at rising loads (× nominal), through the service refusing at once
behind each admission it has (the SLO gate, the in-flight cap); at each load the share of the
feasible interactive requests (both bands; those an idle replica could serve within the SLO)
that meet both SLOs. The capacity at SLO is the highest load at which some refusing service
still meets :data:`~bench.loop.run.ATTAINMENT_KNEE` (90%) of them — the loop bench's knee, the
same rule — interpolated between the loads tried.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from bench.flow.cases import DEFAULT, simulate
from bench.flow.workload import overload
from bench.loop.run import ATTAINMENT_KNEE, knee
from placement.domain.fleet import Fleet

LOADS = (0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.25, 2.5, 3.0)
REFUSING = ("gate", "cap")  # the admissions the service refuses by


def measure_capacity(
    fleet: Fleet,
    *,
    end: float,
    seed: int,
    loads: Sequence[float] = LOADS,
    drain_s: float = 60.0,
    router: str = DEFAULT.router,
) -> tuple[float, list[dict[str, Any]]]:
    """The capacity at SLO in units of nominal load, measured on the trace's ``[0, end)``
    share with requests routed by ``router``, and the rows measured (one per admission and
    load)."""
    rows: list[dict[str, Any]] = []
    knees: dict[str, float] = {}
    for admission in REFUSING:
        setting = replace(DEFAULT, queue="refuse", admission=admission, router=router)
        measured = []
        for load in loads:
            traffic = overload(fleet, load, start=0.0, end=end, backlog_s=0.0, seed=seed)
            row = simulate(traffic, fleet, setting, seed=seed, drain_s=drain_s)
            row = {
                "phase": "capacity",
                "load": load,
                "slo_attainment": row["attainment_interactive_feasible"],
                **row,
            }
            measured.append(row)
        knees[admission] = knee(measured)
        rows += measured
    best = max(knees.values())
    if best <= 0:
        raise ValueError(
            f"no load of {list(loads)} meets {ATTAINMENT_KNEE:.0%} of the feasible requests"
        )
    return best, rows
