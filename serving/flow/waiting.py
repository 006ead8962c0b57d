"""Where a request the fleet cannot take at once waits: flow control in the gateway and in the
endpoint picker.

The order, bounds and deadlines are :class:`serving.flow.FlowQueue`'s; this module is the
asyncio around it. A request admission refuses (or that would overtake requests already
waiting in its band or above) is offered to the queue and its caller awaits a future; the
queue is *pumped* — its candidates routed, highest band first, earliest deadline first within
a band, fair across tenants — whenever a request placed through it ends (capacity freed), and
on a timer while anything waits (the SLO gate's forecast moves with time, leases expire). The
future resolves to the :class:`~serving.service.Routed` decision, and the very coroutine that
holds the client's connection (the gateway's HTTP request, the picker's gRPC stream) carries
it on: no lookup per token. It is refused with 429 and a Retry-After when the queue refuses it
at the door (its deadline cannot be met, its tenant's share of the queue is full, the queue is
full) or when its latest dispatch moment passes while it waits (a deadline miss). A client
that disconnects while waiting (the ASGI ``http.disconnect``, or its waiting coroutine
cancelled, as gRPC does when a stream is cancelled) is taken out of the queue at once.
Whatever is routed carries the time its first token has left (``RouteQuery.ttft_budget_s``:
its deadline less now, and ``band_headroom`` of that below the top band), which the SLO gate
judges it by.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from starlette.types import Receive

from placement.domain.requests import DEFAULT_CLASSES
from serving.admission.cost import GpuRates, mean_rates
from serving.flow import FlowPolicy, FlowQueue, Waiting, shows_load
from serving.metrics import BoundedLabel
from serving.route.types import RouteQuery
from serving.service import PlacementService, Refused, Routed

WAIT_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0)
TICK_S = 0.02  # how often the queue is pumped while something waits
DEFAULT_TTFT_SLO_S = 2.0


class ClientGone(Exception):
    """The client disconnected while its request waited."""


@dataclass(slots=True, eq=False)
class Ticket:
    """A waiting request: what to route and where its decision goes."""

    query: RouteQuery
    future: asyncio.Future[Routed]


class QueueMetrics:
    """Queue lengths (by tenant and band), waits and deadline misses in ``/metrics``."""

    def __init__(
        self,
        registry: CollectorRegistry,
        queue: FlowQueue[Ticket],
        tenant_label: BoundedLabel,
        prefix: str = "placement_gateway",
    ) -> None:
        self.tenant_label = tenant_label
        self.waits = Histogram(
            f"{prefix}_queue_wait_seconds",
            "Time requests waited in the flow-control queue before dispatch, by tenant and band",
            ["tenant", "band"],
            buckets=WAIT_BUCKETS,
            registry=registry,
        )
        self.outcomes = Counter(
            f"{prefix}_queue",
            "Requests offered to the flow-control queue by what became of them (dispatched, "
            "deadline_missed, client_gone, refused_deadline, refused_queue_share, "
            "refused_queue_full), by tenant and band",
            ["tenant", "band", "outcome"],
            registry=registry,
        )
        self.misses = Counter(
            f"{prefix}_deadline_misses",
            "Requests whose TTFT deadline passed while they waited (answered 429), by tenant "
            "and band",
            ["tenant", "band"],
            registry=registry,
        )
        registry.register(_Lengths(queue, tenant_label, f"{prefix}_queue_length"))

    def count(self, item: Waiting[Ticket], outcome: str) -> None:
        self.outcomes.labels(self.tenant_label(item.tenant), str(item.band), outcome).inc()


class _Lengths(Collector):
    def __init__(self, queue: FlowQueue[Ticket], tenant_label: BoundedLabel, name: str) -> None:
        self.queue = queue
        self.tenant_label = tenant_label
        self.name = name

    def collect(self):  # type: ignore[no-untyped-def]
        family = GaugeMetricFamily(
            self.name,
            "Requests waiting in the flow-control queue, by tenant and band",
            labels=["tenant", "band"],
        )
        totals: dict[tuple[str, str], int] = {}
        for (tenant, band), n in list(self.queue.lengths.items()):
            key = (self.tenant_label(tenant), str(band))
            totals[key] = totals.get(key, 0) + n
        for labels, n in sorted(totals.items()):
            family.add_metric(list(labels), n)
        yield family


class WaitingRoom:
    """A flow-control queue and its pump; its metrics are named ``{metric_prefix}_queue…``."""

    def __init__(
        self,
        service: PlacementService,
        policy: FlowPolicy,
        *,
        prefill_tokens_per_s: float,
        clock: Callable[[], float] = time.monotonic,
        metric_prefix: str = "placement_gateway",
    ) -> None:
        self.service = service
        self.queue: FlowQueue[Ticket] = FlowQueue(
            policy, credit_share=service.admission.credit_share
        )
        self.prefill_tokens_per_s = prefill_tokens_per_s
        self.clock = clock
        self.metrics = QueueMetrics(
            service.metrics.registry, self.queue, service.metrics.tenant_label, metric_prefix
        )
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self.offered = 0  # requests offered to the queue so far (they could not go at once)
        # when a request last had to wait or was refused (batch work stays paused a while;
        # not for one no idle capacity could place: :meth:`_pressed`)
        self.pressed_at = float("-inf")
        self._rates: GpuRates = mean_rates(())
        self._priced_for = 0  # replicas registered when the rates were averaged

    def price(self, query: RouteQuery) -> float:
        """What ``query`` is charged in the queue's fair order: GPU-seconds of its prompt and
        output allowance on the registered replicas' average kind (which one serves it is not
        known while it waits; :mod:`serving.admission.cost`)."""
        replicas = self.service.replicas
        if self._priced_for != len(replicas):
            kinds = [(s.accelerator, s.model, s.tp) for s in list(replicas.values())]
            self._rates, self._priced_for = mean_rates(kinds), len(replicas)
        return self._rates.request(query.input_tokens, 0, query.max_output_tokens)

    @property
    def enabled(self) -> bool:
        return self.queue.policy.max_queued > 0

    def band(self, request_class: str) -> int:
        budget = self.service.admission.classes.get(request_class)
        return budget.priority if budget is not None else 0

    @staticmethod
    def ttft_slo_s(request_class: str, given: float | None) -> float:
        """A request's TTFT SLO: the one it was sent with, else its class's."""
        if given is not None:
            return given
        known = DEFAULT_CLASSES.get(request_class)
        return known.ttft_slo_s if known is not None else DEFAULT_TTFT_SLO_S

    # ---- lifecycle -----------------------------------------------------------------------
    def start(self) -> None:
        self._wake = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    # ---- one request ---------------------------------------------------------------------
    async def route(
        self,
        query: RouteQuery,
        *,
        arrival: float,
        ttft_slo_s: float | None,
        receive: Receive | None = None,
        on_queued: Callable[[float], None] | None = None,
    ) -> Routed:
        """Place ``query`` now, or wait in the queue until it is placed; raises
        :class:`~serving.service.Refused` (429), :class:`ClientGone` (``receive`` said the
        client disconnected), or whatever routing raises (:class:`~serving.route.types.NoReplica`,
        bad input). Cancelled while it waits, it leaves the queue at once. ``on_queued`` is
        told, when it starts waiting, the longest it may wait (seconds until its latest
        dispatch)."""
        band = self.band(query.request_class)
        queue = self.queue
        slo = self.ttft_slo_s(query.request_class, ttft_slo_s)
        policy = queue.policy
        deadline = arrival + slo * policy.deadline_slack
        service_s = query.input_tokens / self.prefill_tokens_per_s
        if not self.enabled or queue.may_place_at_once(band):
            try:
                if not self.enabled:
                    return self.service.route(query)
                budget = policy.ttft_budget(band, deadline, self.clock())
                return self.service.route(replace(query, ttft_budget_s=budget))
            except Refused:
                if not self.enabled:
                    self._pressed(service_s, slo)
                    raise
        self._pressed(service_s, policy.ttft_budget(band, deadline, self.clock()))
        future: asyncio.Future[Routed] = asyncio.get_running_loop().create_future()
        item = queue.make(
            Ticket(query, future),
            tenant=query.tenant,
            band=band,
            arrival=arrival,
            ttft_slo_s=slo,
            service_s=service_s,
            input_tokens=query.input_tokens,
            output_tokens=query.max_output_tokens,
            cost=self.price(query),
        )
        now = self.clock()
        self.offered += 1
        offer = queue.offer(item, now)
        if not offer.queued:
            self.metrics.count(item, "refused_" + offer.reason)
            self.service.metrics.refusals.labels(offer.reason).inc()
            raise Refused(offer.reason, offer.retry_after_s)
        self.pump()
        if not future.done():
            if self._wake is not None:
                self._wake.set()
            if on_queued is not None:
                on_queued(max(0.0, item.latest_start - now))
        gone = asyncio.ensure_future(_disconnect(receive)) if receive is not None else None
        try:
            await asyncio.wait(
                (future,) if gone is None else (future, gone),
                return_when=asyncio.FIRST_COMPLETED,
            )
        except asyncio.CancelledError:
            self._leave(item)
            raise
        finally:
            if gone is not None:
                gone.cancel()
        if not future.done():
            self._leave(item)
            raise ClientGone
        return future.result()

    def _pressed(self, service_s: float, budget_s: float) -> None:
        """A request had to wait or was refused: batch work stays paused a while, unless no
        idle capacity could have placed it either (:func:`~serving.flow.idle.shows_load`)."""
        if shows_load(service_s, budget_s):
            self.pressed_at = self.clock()

    def _leave(self, item: Waiting[Ticket]) -> None:
        """Its client went away while it waited: out of the queue at once."""
        if self.queue.remove(item):
            self.metrics.count(item, "client_gone")
        item.payload.future.cancel()

    # ---- the pump ------------------------------------------------------------------------
    def pump(self) -> None:
        """Expire what can no longer meet its deadline, then place what can be placed."""
        queue = self.queue
        if not queue.waiting:
            return
        now = self.clock()
        for item in queue.expire(now):
            label = self.metrics.tenant_label(item.tenant)
            self.metrics.misses.labels(label, str(item.band)).inc()
            self.metrics.count(item, "deadline_missed")
            self.service.metrics.refusals.labels("deadline").inc()
            _fail(item, Refused("deadline", queue.retry_after_s(item.band)))
        for item in queue.candidates():
            ticket = item.payload
            if ticket.future.done():  # its client left between two pumps
                queue.remove(item)
                continue
            budget = queue.policy.ttft_budget(item.band, item.deadline, now)
            try:
                routed = self.service.route(replace(ticket.query, ttft_budget_s=budget), retry=True)
            except Refused:
                continue  # the queue offers what may backfill, if anything: lower bands wait
            except Exception as exc:  # no replica, bad input: answered as without a queue
                queue.dispatched(item, now)
                _fail(item, exc)
                continue
            queue.dispatched(item, now)
            self.metrics.waits.labels(
                self.metrics.tenant_label(item.tenant), str(item.band)
            ).observe(now - item.arrival)
            self.metrics.count(item, "dispatched")
            ticket.future.set_result(routed)

    async def _run(self) -> None:
        wake = self._wake
        assert wake is not None
        while True:
            if not self.queue.waiting:
                wake.clear()
                await wake.wait()
            await asyncio.sleep(TICK_S)
            self.pump()


def _fail(item: Waiting[Ticket], exc: BaseException) -> None:
    if not item.payload.future.done():
        item.payload.future.set_exception(exc)


async def _disconnect(receive: Receive) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
