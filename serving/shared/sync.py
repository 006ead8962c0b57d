"""The loop that keeps service processes sharing a fleet in step through Redis.

Every ``interval_s`` each process, off the route path (the exchange runs in a thread; the
route path never waits on Redis):

- adds its new requests to the fleet's demand (the planner of any process solves for all);
- adds what its tenants were charged to the shared credit counters, and takes the fleet's
  counters back (its Virtual Token Counters then order tenants by the whole fleet's service);
- adds its usage counts, and takes the fleet's totals back;
- publishes what it holds in flight (per tenant) and the replicas its scrapes found down, and
  takes the others': admission counts what the others hold against the one fleet budget, and a
  replica any process found down is avoided by every process;
- follows the tenants document (an admin edit made through any process applies everywhere).

**Redis down.** Every process keeps routing from its last plan: the route path reads only
local state. Once the others' state is older than ``ttl_s`` it is dropped and the process
admits on its own counts alone; ``/healthz`` says so and ``placement_shared_state_up`` is 0.
When Redis is back each process re-publishes its plan (the planner), its tenants (the
tenancy) and, if the shared state was lost, its part of the counters (``reseed``), so all of
them converge on one plan, one set of tenants and one set of counters.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import uuid
from typing import Any

from prometheus_client import Gauge

from serving.demand import shared_chunk
from serving.service import PlacementService
from serving.shared.redis_state import Incoming, Outgoing, ProcessState, RedisSharedState
from serving.tenants import LiveTenancy

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 0.25
DEFAULT_TTL_S = 3.0


def process_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


class SharedSync:
    def __init__(
        self,
        service: PlacementService,
        state: RedisSharedState,
        *,
        tenancy: LiveTenancy | None = None,
        interval_s: float = DEFAULT_INTERVAL_S,
        ttl_s: float = DEFAULT_TTL_S,
    ) -> None:
        self.service = service
        self.state = state
        self.tenancy = tenancy
        self.interval_s = interval_s
        self.ttl_s = ttl_s
        self.connected = False
        self.last_ok: float | None = None  # monotonic time of the last good exchange
        self.down_since: float | None = None  # wall time Redis became unreachable
        self.error = ""
        self.exchanges = 0
        self._epoch: str | None = None
        self._reseed = False
        self._cursor = 0  # demand rows already shared
        self._credit_base: dict[str, float] = dict(service.admission.vtc.counters)
        registry = service.metrics.registry
        self._up = Gauge(
            "placement_shared_state_up",
            "1 while the shared state (Redis) answers, 0 while routing on local state",
            registry=registry,
        )
        self._peers = Gauge(
            "placement_shared_state_peers",
            "other service processes sharing the fleet, as last seen",
            registry=registry,
        )
        self._up.set(0)

    # --- what /healthz says -----------------------------------------------------------------

    def health(self) -> tuple[bool, str]:
        plan = self.service.plan
        routing = f"plan {plan.version}" if plan is not None else "no plan"
        if self.connected:
            return True, f"shared state up; routing from {routing}"
        since = f" for {time.time() - self.down_since:.1f} s" if self.down_since is not None else ""
        return False, (
            f"shared state unreachable{since} ({self.error}): routing from {routing} on local state"
        )

    # --- one exchange -----------------------------------------------------------------------

    def _collect(self) -> tuple[Outgoing, dict[str, float]]:
        service = self.service
        admission = service.admission
        counters = dict(admission.vtc.counters)
        if self._reseed:
            credits = counters
            usage = service.usage.reseed()
        else:
            credits = {
                t: c - self._credit_base.get(t, 0.0)
                for t, c in counters.items()
                if c != self._credit_base.get(t, 0.0)
            }
            usage = service.usage.pending()
        demand = None
        window = service.demand
        if window is not None:
            rows = window.since(self._cursor)
            self._cursor = window.recorded
            if rows:
                demand = shared_chunk(rows, clock_offset_s=time.time() - service.clock())
        sheddable = sum(
            n
            for c, n in admission.in_flight_by_class.items()
            if c in admission.classes and admission.classes[c].sheddable
        )
        plan = service.plan
        out = Outgoing(
            state=ProcessState(
                process=self.state.process,
                in_flight=admission.in_flight,
                sheddable=sheddable,
                by_tenant=dict(admission.in_flight_by_tenant),
                down=tuple(sorted(service.down_here())),
                plan_version=plan.version if plan is not None else None,
            ),
            epoch=self._epoch,
            demand=demand,
            credits=credits,
            usage=usage,
            reseed=self._reseed,
        )
        return out, counters

    def _exchange(self, out: Outgoing) -> Incoming:
        incoming = self.state.exchange(out)
        if self.tenancy is not None and not incoming.lost:
            self.tenancy.follow()
        return incoming

    async def tick(self) -> bool:
        """One exchange; True when Redis answered."""
        out, counters = self._collect()
        try:
            incoming = await asyncio.to_thread(self._exchange, out)
        except Exception as exc:  # redis errors, timeouts, a tenancy that no longer parses
            self._failed(exc, out)
            return False
        self._apply(out, counters, incoming)
        return True

    def _failed(self, exc: Exception, out: Outgoing) -> None:
        if self.connected or self.down_since is None:
            log.warning("shared state unreachable, routing on local state: %s", exc)
            self.down_since = time.time()
        self.connected = False
        self.error = f"{type(exc).__name__}: {exc}"[:200]
        self._up.set(0)
        # what was not added is added next time (the usage stays pending, the credit base
        # where it was); the requests not shared are left out of the fleet's demand window
        now = time.monotonic()
        if self.last_ok is None or now - self.last_ok > self.ttl_s:
            # the others' counts are stale: admit on this process's own
            self.service.admission.set_elsewhere(in_flight=0, sheddable=0, by_tenant={})
            self.service.set_down_elsewhere(frozenset())

    def _apply(self, out: Outgoing, counters: dict[str, float], incoming: Incoming) -> None:
        service = self.service
        if incoming.lost:
            log.warning(
                "shared state lost (new epoch %s): re-seeding this process's part", incoming.epoch
            )
            self._epoch = incoming.epoch
            self._reseed = True
            return
        if not self.connected:
            log.warning("shared state reachable again")
        self.connected = True
        self.down_since = None
        self.error = ""
        self._up.set(1)
        self.last_ok = time.monotonic()
        self.exchanges += 1
        self._epoch = incoming.epoch
        self._reseed = False
        service.usage.shared_totals(out.usage, incoming.usage)
        # the fleet's counters, plus what this process charged while the exchange ran
        vtc = service.admission.vtc
        for tenant, total in incoming.credits.items():
            moved = vtc.counters.get(tenant, 0.0) - counters.get(tenant, 0.0)
            vtc.counters[tenant] = total + moved
        self._credit_base = {t: incoming.credits.get(t, c) for t, c in counters.items()}
        self._credit_base.update(incoming.credits)
        others = incoming.others
        by_tenant: dict[str, int] = {}
        for o in others:
            for t, n in o.by_tenant.items():
                by_tenant[t] = by_tenant.get(t, 0) + n
        service.admission.set_elsewhere(
            in_flight=sum(o.in_flight for o in others),
            sheddable=sum(o.sheddable for o in others),
            by_tenant=by_tenant,
        )
        service.set_down_elsewhere(frozenset(r for o in others for r in o.down))
        self._peers.set(len(others))

    async def run(self) -> None:
        while True:
            started = time.monotonic()
            await self.tick()
            await asyncio.sleep(max(0.0, self.interval_s - (time.monotonic() - started)))

    def leave(self) -> None:
        try:
            self.state.leave()
        except Exception as exc:
            log.info("could not withdraw this process's shared state: %s", exc)


def describe(sync: SharedSync | None) -> dict[str, Any]:
    """The shared state's status for ``/healthz`` (``{}`` without sharing)."""
    if sync is None:
        return {}
    ok, detail = sync.health()
    return {"shared_state": "up" if ok else "down", "detail": detail}
