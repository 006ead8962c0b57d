"""The simulator's flow-control seam: arrivals go to the holding, which places them at once or
keeps them; it is pumped as engines step until it holds nothing."""

from __future__ import annotations

import itertools

from placement.domain.requests import Request
from sim.router import Place
from sim.simulator import Simulator
from sim.workloads.base import Workload


class OneAtATime:
    """Places a request only while nothing it placed is unfinished; keeps the rest in order."""

    def __init__(self) -> None:
        self.held: list[Request] = []
        self.running: Request | None = None
        self.pumps = 0
        self.order: list[int] = []

    def busy(self) -> bool:
        return bool(self.held)

    def arrive(self, req: Request, now: float, place: Place) -> None:
        if req.input_tokens > 10_000:
            req.error = "refused: too long"
            return
        self.held.append(req)
        self.pump(now, place)

    def pump(self, now: float, place: Place) -> None:
        self.pumps += 1
        if self.running is not None and self.running.finish_s < 0:
            return
        if self.held and place(self.held[0], now):
            self.running = self.held.pop(0)
            self.order.append(self.running.id)


def test_held_requests_are_placed_one_by_one_as_capacity_frees(fleet, cost, policy, make_requests):
    reqs = make_requests(30, 50.0, 3)
    reqs[5].input_tokens = 20_000
    holding = OneAtATime()
    sim = Simulator(
        fleet,
        policy,
        Workload(name="t", requests=reqs, tenants={}),
        cost_model=lambda s: cost,
        holding=holding,
    )
    result = sim.run()
    served = [r for r in result.requests if not r.error]
    assert len(served) == 29 and result.requests[5].error == "refused: too long"
    assert holding.order == [r.id for r in served]  # in arrival order, none dropped
    assert holding.pumps > 29
    runs = sorted((r.first_token_s, r.finish_s) for r in served)
    # one at a time: each starts after the one before finished
    assert all(nxt[0] >= prev[1] - 1e-9 for prev, nxt in itertools.pairwise(runs))
    assert all(v.outstanding == 0 for v in sim.gateway.views)
