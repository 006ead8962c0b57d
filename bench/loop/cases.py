"""The benchmark's cases from CLI text: workloads × fleets, each trace cut to its default span.

Default spans keep a full run within minutes on two cores: the whole Mooncake slice (2,100 s),
30 minutes of the mixed populations (~28k requests) and 10 minutes of the synthetic tenants.
"""

from __future__ import annotations

from pathlib import Path

from bench.loop.run import Case
from placement.domain.fleet import load_fleet
from placement.errors import InputError
from sim.workloads.registry import WORKLOADS, load_workload

DEFAULT_SPAN_S: dict[str, float | None] = {"mooncake": None, "mixed": 1800.0, "synthetic": 600.0}


def _names(text: str, field: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise InputError("empty list", field=field, expected="a comma list")
    return names


def build_cases(
    *,
    workloads: str,
    fleets: str,
    loads: tuple[float, ...],
    peers: tuple[str, ...],
    duration_s: float | None,
    period_s: float,
    learn: bool,
    seed: int,
) -> list[Case]:
    if not peers:
        raise InputError("no peer policy to compare with", field="--peers")
    fleet_list = [load_fleet(Path(f)) for f in _names(fleets, "--fleets")]
    cases = []
    for name in _names(workloads, "--workloads"):
        if name not in WORKLOADS:
            raise InputError(
                f"unknown workload {name!r}", field="--workloads", expected=", ".join(WORKLOADS)
            )
        span = duration_s if duration_s is not None else DEFAULT_SPAN_S.get(name, 600.0)
        workload = load_workload(name, seed=seed, duration_s=span)
        for fleet in fleet_list:
            cases.append(
                Case(
                    workload=workload,
                    fleet=fleet,
                    peers=peers,
                    loads=loads,
                    period_s=period_s,
                    learn=learn,
                    seed=seed,
                )
            )
    return cases
