"""The gateway's flow control in the simulator: the very queue and idle rule the gateway runs
(:mod:`serving.flow`), between the trace's arrivals and the routing policy.

An interactive arrival is placed at once when nothing of its band or above waits and the policy
(behind the service's SLO gate) takes it; otherwise it is offered to the queue, which refuses
it at the door or keeps it until it is placed or its dispatch deadline passes (``refused:
deadline``). With ``max_queued = 0`` this is the same service refusing at once. Batch arrivals
(class ``batch``) wait in arrival order and start only while the idle rule allows; an interactive
request counts against its calm only if it :func:`~serving.flow.idle.shows_load`. A result
cache answers an arrival at once when the same prompt (block hashes and lengths) was answered
before and is still among the last ``cache_entries``.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from placement.domain.requests import Request, RequestClass
from serving.flow import FlowPolicy, FlowQueue, IdlePolicy, shows_load
from sim.router import Place

BATCH = "batch"


@dataclass(slots=True)
class HoldingStats:
    cache_hits: int = 0
    cache_lookups: int = 0
    queued: int = 0
    refused_at_door: int = 0
    deadline_misses: int = 0
    batch_started: int = 0
    max_waiting: int = 0


class FlowHolding:
    def __init__(
        self,
        classes: Mapping[str, RequestClass],
        policy: FlowPolicy,
        *,
        in_flight: Callable[[], int],
        budget: int,
        idle: IdlePolicy,
        prefill_s: Callable[[Request], float],
        cache_entries: int = 0,
        credit_shares: Mapping[str, float] | None = None,
    ) -> None:
        shares = dict(credit_shares or {})
        self.classes = classes
        self.queue: FlowQueue[Request] = FlowQueue(policy, credit_share=lambda t: shares.get(t, 0))
        self.in_flight = in_flight
        self.budget = budget
        self.idle = idle
        self.prefill_s = prefill_s
        self.cache_entries = cache_entries
        self._cache: OrderedDict[tuple[object, ...], Request] = OrderedDict()
        self.batch: deque[Request] = deque()
        self._batch_running: list[Request] = []
        self._deadlines: dict[int, tuple[int, float]] = {}  # request id → (band, deadline)
        self.stats = HoldingStats()
        self.pressed_at = float("-inf")  # when an interactive request last waited or was refused

    def ttft_budget(self, req: Request, now: float) -> float | None:
        """The time ``req`` still has for its first token (None: its class's SLO)."""
        if self.queue.policy.max_queued == 0:
            return None
        due = self._deadlines.get(req.id)
        return None if due is None else self.queue.policy.ttft_budget(due[0], due[1], now)

    # ---- the Holding protocol ------------------------------------------------------------
    def busy(self) -> bool:
        return bool(self.queue.waiting or self.batch)

    def arrive(self, req: Request, now: float, place: Place) -> None:
        if self._cached(req, now):
            return
        if req.request_class == BATCH:
            self.batch.append(req)
            return
        cls = self.classes[req.request_class]
        queue = self.queue
        deadline = req.arrival_s + cls.ttft_slo_s * queue.policy.deadline_slack
        self._deadlines[req.id] = (cls.priority, deadline)
        if queue.may_place_at_once(cls.priority) and place(req, now):
            return
        item = queue.make(
            req,
            tenant=req.tenant,
            band=cls.priority,
            arrival=req.arrival_s,
            ttft_slo_s=cls.ttft_slo_s,
            service_s=self.prefill_s(req),
            input_tokens=req.input_tokens,
            output_tokens=req.output_tokens,
        )
        budget = self.ttft_budget(req, now)
        if shows_load(item.service_s, cls.ttft_slo_s if budget is None else budget):
            self.pressed_at = now
        offer = queue.offer(item, now)
        if not offer.queued:
            self.stats.refused_at_door += 1
            req.error = f"refused: {offer.reason}"
            return
        self.stats.queued += 1
        self.stats.max_waiting = max(self.stats.max_waiting, queue.waiting)
        self.pump(now, place)

    def pump(self, now: float, place: Place) -> None:
        queue = self.queue
        if queue.waiting:
            for item in queue.expire(now):
                self.stats.deadline_misses += 1
                item.payload.error = "refused: deadline"
            for item in queue.candidates():
                if place(item.payload, now):
                    queue.dispatched(item, now)
        if self.batch:
            self._start_batch(now, place)

    # ---- batch on idle capacity ----------------------------------------------------------
    def _start_batch(self, now: float, place: Place) -> None:
        running = self._batch_running
        if running:
            running[:] = [r for r in running if r.finish_s < 0 and not r.error]
        while self.batch and self.idle.may_start(
            waiting_above=self.queue.waiting,
            in_flight=self.in_flight(),
            batch_in_flight=len(running),
            budget=self.budget,
            quiet_s=now - self.pressed_at,
        ):
            req = self.batch[0]
            if not place(req, now):
                return  # paused: tried again at the next pump, never failed
            self.batch.popleft()
            running.append(req)
            self.stats.batch_started += 1

    # ---- result cache --------------------------------------------------------------------
    def _cached(self, req: Request, now: float) -> bool:
        if self.cache_entries <= 0 or req.request_class == BATCH:
            return False
        key = (req.model, req.input_tokens, req.output_tokens, *req.block_hashes)
        self.stats.cache_lookups += 1
        earlier = self._cache.get(key)
        if earlier is not None and 0 <= earlier.finish_s <= now and not earlier.error:
            self._cache.move_to_end(key)
            self.stats.cache_hits += 1
            req.first_token_s = req.finish_s = now
            req.replica = -1
            return True
        if earlier is None or earlier.error:  # else the earlier one's answer will be kept
            self._cache[key] = req
        self._cache.move_to_end(key)
        if len(self._cache) > self.cache_entries:
            self._cache.popitem(last=False)
        return False
