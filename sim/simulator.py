"""The discrete-event fleet simulator.

Events sit on a heap ordered by (time, kind, sequence number); arrivals come from the
workload's sorted list and are merged in, so the heap only holds what is pending (one run end
per busy replica, the next scrape, faults, retries). Deterministic: the same inputs give the
same result, since ties are broken by kind and then by insertion order.
"""

from __future__ import annotations

import gc
import heapq
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from placement.domain.base_models import DRAIN_LIMIT_S, swap_load_s
from placement.domain.fleet import Fleet, ReplicaSpec, with_model
from placement.domain.llm import get_model
from placement.domain.requests import Request
from placement.errors import InputError
from sim.costmodel.base import IterationCostModel
from sim.engine import FCFS, Replica
from sim.faults import Fault
from sim.gateway import Gateway
from sim.lora import AdapterSlots, ResidencyEvent, load_times
from sim.model_swap import ModelEvent, SwitchesModels
from sim.router import Holding, RoutingPolicy
from sim.workloads.base import Workload

# event kinds, in the order they are handled when they fall on the same instant
_STEP = 0
_FAULT = 1
_SCRAPE = 2
_RETRY = 3
_SWAP = 4  # a base-model swap's drain deadline or end of load: (replica, swap number)


@dataclass(frozen=True, slots=True, kw_only=True)
class SimConfig:
    """How the simulated world behaves around the engines."""

    scrape_interval_s: float = 0.05  # staleness of the router's replica metrics (GIE: 50 ms)
    retry_backoff_s: float = 0.05  # a failed connection is retried after this
    max_retries: int = 3
    drain_s: float | None = None  # run this long past the last arrival (None: until done)
    faults: tuple[Fault, ...] = ()
    # record each replica's counters every this many seconds (None: no telemetry samples)
    sample_interval_s: float | None = None
    # how every engine orders its waiting queue: FCFS, or by the priority the router sets on
    # each request (vLLM's ``--scheduling-policy priority``, :mod:`sim.engine`)
    scheduling: str = FCFS


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaStats:
    id: str
    accelerator: str
    busy_s: float
    iterations: int
    preemptions: int
    prompt_tokens: int
    cached_tokens: int
    cost_per_hour: float


@dataclass(frozen=True, slots=True)
class ReplicaSample:
    """A replica's metrics at one instant, as its ``/metrics`` would show them.

    Gauges: ``num_running`` (vllm:num_requests_running), ``num_waiting``
    (vllm:num_requests_waiting), ``kv_usage`` (vllm:kv_cache_usage_perc, 0..1). Counters since
    the start: ``prompt_tokens`` (vllm:prompt_tokens_total), ``generation_tokens``
    (vllm:generation_tokens_total), ``prefix_cache_hit_tokens`` (vllm:prefix_cache_hits).
    """

    time_s: float
    replica: int
    alive: bool
    num_running: int
    num_waiting: int
    kv_usage: float
    prompt_tokens: int
    generation_tokens: int
    prefix_cache_hit_tokens: int


@dataclass(kw_only=True)
class SimResult:
    policy: str
    workload: str
    fleet: Fleet
    requests: list[Request]
    replicas: list[ReplicaStats]
    end_s: float
    wall_s: float
    events: int
    refused: int
    retries: int
    routes_to_dead: list[float] = field(default_factory=list)
    samples: list[ReplicaSample] = field(default_factory=list)
    adapter_events: list[ResidencyEvent] = field(default_factory=list)  # LoRA loads/evictions
    model_events: list[ModelEvent] = field(default_factory=list)  # base-model swaps


class Simulator:
    """Runs one workload through one routing policy on one fleet."""

    def __init__(
        self,
        fleet: Fleet,
        policy: RoutingPolicy,
        workload: Workload,
        *,
        cost_model: Callable[[ReplicaSpec], IterationCostModel],
        config: SimConfig | None = None,
        weights: Sequence[float] | None = None,
        holding: Holding | None = None,
    ) -> None:
        """``holding``: flow control between arrivals and the policy (None: every arrival is
        routed at once, and refused when the policy refuses it)."""
        self.fleet = fleet
        self.holding = holding
        self.workload = workload
        self.config = config or SimConfig()
        self.gateway = Gateway(fleet.replicas, policy, weights=weights)
        self.cost_model = cost_model
        self.replicas = [
            Replica(i, spec, cost_model(spec), self.gateway, scheduling=self.config.scheduling)
            for i, spec in enumerate(fleet.replicas)
        ]
        self._attach_adapter_slots()
        ids = {s.id: i for i, s in enumerate(fleet.replicas)}
        for f in self.config.faults:
            if f.replica not in ids:
                raise InputError(
                    f"fault names unknown replica '{f.replica}'",
                    field="replica",
                    expected="one of " + ", ".join(ids),
                )
        self._fault_index = ids
        self._heap: list[tuple[float, int, int, Any]] = []
        self._seq = 0
        self._retries: dict[int, int] = {}
        self.samples: list[ReplicaSample] = []
        self._next_sample_s: float | None = None if self.config.sample_interval_s is None else 0.0
        # base-model swaps in progress: replica → (target model, swap number, loading yet)
        self._swaps: dict[int, tuple[str, int, bool]] = {}
        self.model_events: list[ModelEvent] = []
        if isinstance(policy, SwitchesModels):
            policy.bind_switcher(self)

    def _attach_adapter_slots(self) -> None:
        """LoRA slots on every replica with ``max_loras``; every requested adapter must be
        declared by the workload."""
        adapters = self.workload.adapters
        asked = {r.adapter for r in self.workload.requests if r.adapter}
        unknown = asked - set(adapters)
        if unknown:
            raise InputError(
                f"request names undeclared LoRA adapter {sorted(unknown)[0]!r}",
                field="adapter",
                expected="an adapter of the workload's adapters",
            )
        if not asked:
            return
        for r in self.replicas:
            r.lora = self._slots(r.index, r.spec)

    def _slots(self, index: int, spec: ReplicaSpec) -> AdapterSlots | None:
        """LoRA slots for ``spec`` when it has some and the workload asks for adapters."""
        adapters = self.workload.adapters
        if spec.max_loras <= 0 or not adapters:
            return None
        return AdapterSlots(index, spec.max_loras, load_times(spec, adapters))

    def _push(self, t: float, kind: int, payload: Any) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (t, kind, self._seq, payload))

    def run(self, progress: Callable[[int], None] | None = None) -> SimResult:
        """Simulate until every request is done (or the drain horizon); ``progress(n)`` is
        called with the number of arrivals handled, every 10,000."""
        # The workload's objects live for the whole run: keep the cyclic GC from rescanning
        # them (a full collection over a million requests costs more than the run itself).
        gc.freeze()
        try:
            return self._run(progress)
        finally:
            gc.unfreeze()

    def _run(self, progress: Callable[[int], None] | None) -> SimResult:
        wall0 = time.perf_counter()
        reqs = self.workload.requests
        n = len(reqs)
        heap = self._heap
        replicas = self.replicas
        gateway = self.gateway
        holding = self.holding
        push = self._push
        last_arrival = reqs[-1].arrival_s if reqs else 0.0
        horizon = (
            float("inf") if self.config.drain_s is None else last_arrival + self.config.drain_s
        )
        for f in self.config.faults:
            push(f.at_s, _FAULT, f)
        if reqs:
            push(reqs[0].arrival_s, _SCRAPE, None)
        events = 0
        i = 0
        now = 0.0
        inf = float("inf")
        while True:
            t_arr = reqs[i].arrival_s if i < n else inf
            if heap and heap[0][0] <= t_arr:
                now, kind, _, payload = heapq.heappop(heap)
                if now > horizon:
                    break
                events += 1
                if kind == _STEP:
                    r = replicas[payload]
                    if r.busy and r.run_end_s == now:
                        end = r.step(now)
                        if end is not None:
                            push(end, _STEP, r.index)
                        elif r.draining and r.idle:
                            self._drained(r.index, now)
                        if holding is not None and holding.busy():
                            holding.pump(now, self._place)
                elif kind == _SCRAPE:
                    self._scrape(now)
                    if holding is not None and holding.busy():
                        holding.pump(now, self._place)
                    if i < n or heap or (holding is not None and holding.busy()):
                        push(now + self.config.scrape_interval_s, _SCRAPE, None)
                elif kind == _RETRY:
                    self._dispatch(payload, now)
                elif kind == _SWAP:
                    self._swap_event(payload, now)
                else:
                    self._fault(payload, now)
                continue
            if i >= n:
                break
            now = t_arr
            if now > horizon:
                break
            req = reqs[i]
            i += 1
            events += 1
            if holding is not None:
                holding.arrive(req, now, self._place)
            else:
                self._dispatch(req, now)
            if progress is not None and i % 10_000 == 0:
                progress(i)
        return SimResult(
            policy=gateway.policy.name,
            workload=self.workload.name,
            fleet=self.fleet,
            requests=reqs,
            replicas=[
                ReplicaStats(
                    id=r.spec.id,
                    accelerator=r.spec.accelerator.kind,
                    busy_s=r.busy_s,
                    iterations=r.iterations,
                    preemptions=r.preemptions,
                    prompt_tokens=r.prompt_tokens,
                    cached_tokens=r.cached_tokens,
                    cost_per_hour=r.spec.cost_per_hour,
                )
                for r in replicas
            ],
            end_s=now,
            wall_s=time.perf_counter() - wall0,
            events=events,
            refused=gateway.refused,
            retries=sum(self._retries.values()),
            routes_to_dead=gateway.routes_to_dead,
            samples=self.samples,
            model_events=self.model_events,
            adapter_events=sorted(
                (e for r in replicas if r.lora is not None for e in r.lora.events),
                key=lambda e: e.time_s,
            ),
        )

    def _dispatch(self, req: Request, now: float) -> None:
        if not self._place(req, now):
            req.error = "refused: no replica can serve"

    def _place(self, req: Request, now: float) -> bool:
        """Route ``req`` and send it to its replica; False when the policy refuses it."""
        idx = self.gateway.route(req, now)
        if idx < 0:
            return False
        r = self.replicas[idx]
        if r.draining:  # changing model: refuses the connection, as a restarting engine does
            self.gateway.requeue(req, now)
            self._retry(req, now)
            return True
        if not r.alive:
            self.gateway.connection_failed(req, now)
            self._retry(req, now)
            return True
        end = r.enqueue(req, now)
        if end is not None:
            self._push(end, _STEP, idx)
        return True

    # ---- base-model swaps (sim.model_swap) ------------------------------------------------
    def switch_model(self, replica: int, model: str, now: float) -> bool:
        """Start swapping ``replica`` to ``model`` (:class:`sim.model_swap.ModelSwitcher`)."""
        r = self.replicas[replica]
        if replica in self._swaps or not r.alive or r.spec.model.name == model:
            return False
        if model not in r.spec.models:
            raise InputError(
                f"replica {r.spec.id} cannot hold {model!r}",
                field="model",
                expected="one of " + ", ".join(r.spec.models or (r.spec.model.name,)),
            )
        number = len(self.model_events)
        self._swaps[replica] = (model, number, False)
        view = self.gateway.views[replica]
        view.loading = True
        view.model = model
        self.model_events.append(ModelEvent(now, replica, model, "drain"))
        for req in r.drain():  # never started: routed again at once
            self.gateway.requeue(req, now)
            self._push(now, _RETRY, req)
        if r.idle:
            self._drained(replica, now)
        else:
            self._push(now + DRAIN_LIMIT_S, _SWAP, (replica, number))
        return True

    def _drained(self, replica: int, now: float) -> None:
        """Nothing runs on the swapping ``replica`` any more: its new weights start loading."""
        swap = self._swaps.get(replica)
        if swap is None or swap[2]:
            return
        model, number, _ = swap
        self._swaps[replica] = (model, number, True)
        spec = self.replicas[replica].spec
        load = swap_load_s(get_model(model), gbps=spec.weights_load_gbps, startup_s=spec.startup_s)
        self.model_events.append(ModelEvent(now, replica, model, "load"))
        self._push(now + load, _SWAP, (replica, number))

    def _swap_event(self, payload: tuple[int, int], now: float) -> None:
        replica, number = payload
        swap = self._swaps.get(replica)
        if swap is None or swap[1] != number:
            return  # a deadline of a swap that drained in time
        model, _, loading = swap
        r = self.replicas[replica]
        if not loading:  # the drain's time is up: what still runs is retried elsewhere
            for req in r.evacuate():
                self.gateway.requeue(req, now)
                self._retry(req, now)
            self._drained(replica, now)
            return
        del self._swaps[replica]
        spec = with_model(r.spec, get_model(model))
        r.reload(spec, self.cost_model(spec), self._slots(replica, spec))
        view = self.gateway.views[replica]
        view.kv_capacity_tokens = spec.kv_capacity_tokens
        view.adapters = view.running_adapters = view.waiting_adapters = ()
        view.loading = False
        self.model_events.append(ModelEvent(now, replica, model, "serve"))

    def _retry(self, req: Request, now: float) -> None:
        tries = self._retries.get(req.id, 0)
        if tries >= self.config.max_retries:
            req.error = "lost: retries exhausted"
            return
        self._retries[req.id] = tries + 1
        req.first_token_s = -1.0
        req.replica = -1
        self._push(now + self.config.retry_backoff_s, _RETRY, req)

    def _fault(self, fault: Fault, now: float) -> None:
        r = self.replicas[self._fault_index[fault.replica]]
        if fault.kind == "slow":
            r.slowdown = fault.factor
            return
        for req in r.fail():
            self.gateway.reset_in_flight(req, now)
            self._retry(req, now)

    def _record_samples(self, now: float) -> None:
        for r in self.replicas:
            c = r.cache
            self.samples.append(
                ReplicaSample(
                    now,
                    r.index,
                    r.alive,
                    len(r.decoders) + len(r.prefilling),
                    len(r.waiting),
                    (c.used - c.evictable) / c.capacity if r.alive else 0.0,
                    r.prompt_tokens,
                    r.generated_tokens,
                    r.cached_tokens,
                )
            )

    def _scrape(self, now: float) -> None:
        if self._next_sample_s is not None and now >= self._next_sample_s:
            self._record_samples(now)
            self._next_sample_s = now + (self.config.sample_interval_s or 0.0)
        # the Replica properties of the same names, inlined: this loop runs 20×/s per replica
        for r, v in zip(self.replicas, self.gateway.views, strict=True):
            if not r.alive:
                v.healthy = False
                continue
            v.num_running = len(r.decoders) + len(r.prefilling)
            v.num_waiting = len(r.waiting)
            c = r.cache
            v.kv_usage = (c.used - c.evictable) / c.capacity
            v.prefix_hit_rate = r.cached_tokens / r.prompt_tokens if r.prompt_tokens else 0.0
            if r.lora is not None:
                running = r.lora.active()
                waiting = r.waiting_adapters()
                v.running_adapters = running
                v.waiting_adapters = waiting
                v.adapters = running + waiting
            v.scraped_at_s = now
