"""How our two routers (``gateway`` and ``epp``) run in the comparison: as an operator runs the
product, not as a bare greedy router.

- the live planner on (``PLACEMENT_PLANNER``): the service solves a plan from the requests it
  has routed, at start and every ``solve_period_s`` (:data:`SOLVE_PERIOD_S`, picked on the
  trace's head: see bench/RESULTS.md); until the first plan it routes greedily
  (``--no-plan-fallback``, as before);
- the SLO admission gate on (``PLACEMENT_SLO_GATE``): a request that would miss its SLO on every
  replica it could take is refused (429) or, in the gateway, waits in the flow-control queue
  until its TTFT deadline can no longer be met; its headroom (:data:`SLO_GATE_HEADROOM`) is the
  one knob tuned, on the trace's head;
- the route profile the closed loop measures (``data/profiles/scored.yaml``: the plan steers a
  scored pick);
- a tenants file (written beside the case's logs) with one tenant, :data:`TENANT`, holding the
  whole fleet as its credit, and the class the benchmark scores with the SLOs it scores;
- every request names that tenant and that class in the Gateway API Inference Extension's
  headers (:func:`objective_headers`), sent alike to every router (the others ignore them); the
  SLOs come with the class (aiperf cannot send the numeric ``x-slo-*-ms`` headers: it turns a
  value that reads as a number into one and refuses it).

``Operated(planner=False, slo_gate=False)`` is the set-up measured before: greedy cache-and-load
routing, nothing refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from placement.domain.requests import RequestClass
from placement.paths import repo_root
from serving.gateway.headers import FAIRNESS_ID, OBJECTIVE

TENANT = "mooncake"
SCORED_PROFILE = repo_root() / "data" / "profiles" / "scored.yaml"
# how often the live planner re-solves: set, not tuned (the service's default, 60 s, would not
# re-solve within a replayed window of 45 s; the first solve, at start, has no demand yet)
SOLVE_PERIOD_S = 15.0
# the SLO gate refuses a request forecast to miss its TTFT SLO × this headroom. Tuned on the
# trace's head (45 s from 30% of the scaled trace, gateway alone, loads 1.0 and 2.0, one run
# each, goodput summed; bench/RESULTS.md: "The SLO gate's headroom re-tuned after the
# first-token fix"), with the gateway reporting first tokens at the first byte: gate off /
# 0.5 / 1 / 1.5 / 2 / 3 / 4 gave 11.4 / 23.7 / 24.3 / 20.4 / 17.5 / 12.6 / 12.3 req/s
# (sglang-router there: 8.2 + 6.1). So the service's own default: the 3 tuned before the fix
# (18.5 then) corrected a TTFT calibration learned on whole answers, not the forecast.
SLO_GATE_HEADROOM = 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Operated:
    planner: bool = True
    slo_gate: bool = True
    solve_period_s: float = SOLVE_PERIOD_S
    slo_gate_headroom: float = SLO_GATE_HEADROOM
    profile: Path | None = SCORED_PROFILE  # None: the service's default profile

    @property
    def label(self) -> str:
        parts = [
            f"planner every {self.solve_period_s:g} s" if self.planner else "no plan",
            f"SLO gate, headroom {self.slo_gate_headroom:g}" if self.slo_gate else "no gate",
        ]
        if self.profile is not None:
            parts.append(f"profile {self.profile.stem}")
        return ", ".join(parts)

    def env(self, workdir: Path, request_class: RequestClass) -> dict[str, str]:
        """The ``PLACEMENT_*`` settings of ``placement serve --proxy`` / ``--epp``, the tenants
        file written into ``workdir``."""
        tenants = workdir / "tenants.yaml"
        tenants.write_text(tenants_yaml(request_class))
        env = {
            "PLACEMENT_PLANNER": "true" if self.planner else "false",
            "PLACEMENT_SOLVE_PERIOD_S": f"{self.solve_period_s:g}",
            "PLACEMENT_SLO_GATE": "true" if self.slo_gate else "false",
            "PLACEMENT_SLO_GATE_HEADROOM": f"{self.slo_gate_headroom:g}",
            "PLACEMENT_TENANTS_FILE": str(tenants),
        }
        if self.profile is not None:
            env["PLACEMENT_PROFILE"] = str(self.profile)
        return env


def tenants_yaml(request_class: RequestClass) -> str:
    """One tenant with the whole fleet as its credit; the class with the scored SLOs."""
    doc = {
        "classes": {
            request_class.name: {
                "priority": request_class.priority,
                "ttft_slo_s": request_class.ttft_slo_s,
                "tpot_slo_s": request_class.tpot_slo_s,
                "sheddable": request_class.sheddable,
            }
        },
        "tenants": {TENANT: {"credit_share": 1.0}},
    }
    return yaml.safe_dump(doc, sort_keys=False)


def objective_headers(request_class: RequestClass) -> dict[str, str]:
    """The tenant and class of every request, as Inference Extension headers."""
    return {FAIRNESS_ID: TENANT, OBJECTIVE: request_class.name}
