"""The planner loop inside the simulator: re-solve from the requests just routed, swap in.

Wraps the ``placement`` policy (the service's route path). Every ``period_s`` of simulated
time, and at once when a replica is seen going down, the requests that arrived in the last
``window_s`` are solved into a new plan (warm-started from the current one, so the churn
penalty applies) and installed before the next decision. A solve is instantaneous in simulated
time; its wall time is recorded. Demand is read from the requests the router has seen, as the
service's planner reads its own recent requests; their output lengths come from the trace.

Where the fleet's replicas may change base model, a plan that gives a replica another model
than the one it holds starts that swap in the simulator (:mod:`sim.model_swap`) before the
next decision; the route path sends the replica nothing until it serves the new model.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from bench.loop.plans import Planning
from bench.policies.route_path import PlacementPolicy
from placement.domain.requests import Request
from placement.plan import Plan
from sim.model_swap import ModelSwitcher
from sim.router import ReplicaView


class Replanning:
    name = "placement"

    def __init__(
        self,
        policy: PlacementPolicy,
        planning: Planning,
        *,
        period_s: float | None,
        window_s: float | None = None,
        plan: Plan | None = None,
    ) -> None:
        self.policy = policy
        self.planning = planning
        self.period_s = period_s
        self.window_s = window_s if window_s is not None else (period_s or 0.0)
        self.plan = plan
        self._recent: deque[Request] = deque()
        self._next_s = period_s if period_s is not None else float("inf")
        self._down: frozenset[str] = frozenset()
        self._switcher: ModelSwitcher | None = None
        self._unapplied = plan is not None  # the plan's base models, not yet asked of the fleet
        policy.install_plan(plan)

    def bind_switcher(self, switcher: ModelSwitcher) -> None:
        """The simulated fleet, which swaps base models when a plan says so."""
        self._switcher = switcher

    def route(self, req: Request, replicas: Sequence[ReplicaView], now: float) -> int:
        recent = self._recent
        recent.append(req)
        horizon = now - self.window_s
        while recent and recent[0].arrival_s < horizon:
            recent.popleft()
        down = frozenset(v.id for v in replicas if not v.healthy)
        if down != self._down:
            self._down = down
            self._resolve(now, "replica down" if down else "replica back")
        elif now >= self._next_s:
            self._resolve(now, "period")
        if self._unapplied:
            self._apply_base_models(replicas, now)
        return self.policy.route(req, replicas, now)

    def _apply_base_models(self, replicas: Sequence[ReplicaView], now: float) -> None:
        """Start the swaps the plan asks for (a replica already swapping is left alone)."""
        self._unapplied = False
        if self._switcher is None or self.plan is None:
            return
        index = {v.id: v for v in replicas}
        for r in self.plan.replicas:
            v = index.get(r.id)
            if v is not None and v.healthy and not v.loading and v.model != r.model:
                self._switcher.switch_model(v.index, r.model, now)

    def _resolve(self, now: float, reason: str) -> None:
        if self.period_s is not None:
            self._next_s = now + self.period_s
        if not self._recent:
            return
        span = max(now - self._recent[0].arrival_s, 1.0)
        plan = self.planning.solve(
            list(self._recent),
            window_s=span,
            at_s=now,
            reason=reason,
            unhealthy=self._down,
            previous=self.plan,
            horizon_s=self.period_s,
        )
        if plan is not None:
            self.plan = plan
            self._unapplied = True
            self.policy.install_plan(plan)

    def on_first_token(self, req: Request, replica: ReplicaView, now: float) -> None:
        self.policy.on_first_token(req, replica, now)

    def on_complete(self, req: Request, replica: ReplicaView, now: float) -> None:
        self.policy.on_complete(req, replica, now)
