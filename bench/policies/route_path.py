"""``placement``: the service's own route path (:mod:`serving.route`), run in the simulator.

The very code that serves HTTP decides here: this adapter mirrors the simulator's
:class:`ReplicaView` objects into :class:`~serving.route.types.ReplicaState` (health at every
decision; scraped metrics when a new scrape has landed), turns each :class:`Request` into a
:class:`~serving.route.types.RouteQuery`, and forwards the dispatch, first-token and completion
hooks so the route path keeps its own in-flight counts and prefix index.

Its settings are a :class:`PlacementSettings` under the ``placement`` key of
``PolicyContext.settings``. With no plan (``PlacementSettings.plan`` None) every decision
takes the profile's no-plan fallback, the greedy cache-and-load score; a closed-loop
benchmark passes a solved plan in the settings and swaps in re-solved ones with
:meth:`PlacementPolicy.install_plan`. With
``PlacementSettings.slo_gate`` set, admission runs before dispatch as in the service
(:class:`serving.admission.slo_gate.SloGate`): a refused request is returned as -1 (the
simulator counts it refused, the client would get a 429) and counted in ``shed``.
A request with no model name goes to the pool of the fleet's first replica. Each replica keeps
the tensor-parallel degree it runs at (its view's ``tp``): the prefill and decode tables the
route path and the gate read are its kind's (TP 1 for every replica made the gate judge a
Llama-3-70B on 4×H100 by one H100's tables: a full-chunk step of 439 ms instead of 175 ms, and
every such request's TPOT refused as a certain miss on ``multi-model``).
With ``PlacementSettings.engine_priority`` set, every request is sent with an engine priority
(:mod:`serving.admission.engine_priority`: by class, or by class and credit standing), for a
fleet whose engines schedule by it (``SimConfig.scheduling``), and the route path keeps each
replica's queued prompts by priority so that the gate forecasts only the queue ahead.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from placement.domain.requests import DEFAULT_CLASSES, Request, RequestClass
from placement.plan import Plan
from serving.admission.engine_priority import CLASS, CREDIT, EnginePriority
from serving.admission.share_cap import DEFAULT_SHARE_WINDOW_S
from serving.admission.slo_gate import (
    DEFAULT_CREDIT_CUT,
    DEFAULT_OVERLOAD_REFUSE_AT,
    GPU_SECONDS,
    Judgement,
    SloGate,
)
from serving.route import NoReplica, PlacementRoutePath, ReplicaState, RouteQuery, load_profile
from sim.peers.context import PolicyContext
from sim.router import ReplicaView

NAME = "placement"


@dataclass(frozen=True, slots=True, kw_only=True)
class GateSettings:
    """The ``placement`` policy's admission gate (:class:`serving.admission.slo_gate.SloGate`)."""

    headroom: float = 1.0
    credit_cut: float = DEFAULT_CREDIT_CUT
    overload_refuse_at: float = DEFAULT_OVERLOAD_REFUSE_AT
    # the strict regime past capacity by the queue (None: none; see the gate)
    strict_refuse_at: float | None = None
    strict_credit_cut: float = 0.0
    shed_factor: float = 1.0
    # shadow: judge every request but admit them all, recording which the gate would have
    # refused (``PlacementPolicy.would_refuse``) — what the gate's precision is measured on
    shadow: bool = False
    charge: str = GPU_SECONDS  # what credits are charged in (TOKENS: per weighted token)
    # the second look's cold moves kept to replicas with prefill to spare (None: off)
    cold_move_ttft_share: float | None = None
    credit_slack: float | None = None
    # past capacity, this share of the TTFT limit kept from tenants over their share (0: none)
    credit_reserve: float = 0.0
    # the TPOT forecast by work (prompt tokens to compute, learned TPOT ratio; off: received)
    tpot_by_work: bool = False
    # the TPOT forecast in prompt tokens computed, at the kind's prefill rate (off: received)
    tpot_computed: bool = False
    # the TPOT rule refuses only at the gate's own threshold below this share of SLO refusals
    tpot_shed_from: float | None = None
    # audit: this share of the refusals (chosen by request id) is admitted anyway and recorded
    # like the shadow's — the gate's precision under the regime it runs in, where the shadow
    # judges a fleet that nothing guards
    audit_share: float = 0.0
    # the overload signals kept per model pool (False: one for the fleet)
    pressure_by_model: bool = False
    # past capacity, a tenant served past this many times its entitlement in its pool over
    # the last ``share_window_s`` yields (None: no cap; :mod:`serving.admission.share_cap`)
    share_cap: float | None = None
    share_window_s: float = DEFAULT_SHARE_WINDOW_S
    # a running LoRA adapter of a tenant at its share yields its slot to a tenant below its
    # share waiting that many seconds for one (None: never; needs the share cap;
    # :class:`serving.admission.slo_gate.SloGate`, "Slot turns")
    slot_turn_s: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PlacementSettings:
    """The ``placement`` policy's inputs (``PolicyContext.settings["placement"]``).

    ``plan``: a solved plan (None: the no-plan fallback); ``route_profile``: a route profile
    YAML (None: data/profiles/default.yaml); ``slo_gate``: admission before routing (None:
    every request is routed), judged by ``classes``, starting from the tenants' ``credits``
    shares (a plan's guaranteed shares replace them).
    """

    plan: Plan | None = None
    route_profile: Path | None = None
    slo_gate: GateSettings | None = None
    classes: Mapping[str, RequestClass] = field(default_factory=lambda: dict(DEFAULT_CLASSES))
    credits: Mapping[str, float] = field(default_factory=dict)
    # the engine priority each request is sent with (None: none; "class" or "credit", see
    # :mod:`serving.admission.engine_priority`; "credit" without credits or a gate to count
    # them is "class")
    engine_priority: str | None = None


class PlacementPolicy:
    name = "placement"

    def __init__(
        self,
        path: PlacementRoutePath,
        gate: SloGate | None = None,
        *,
        shadow: bool = False,
        audit_share: float = 0.0,
        priorities: EnginePriority | None = None,
    ) -> None:
        self.path = path
        self.gate = gate
        self.priorities = priorities
        self.shadow = shadow
        self.audit_share = audit_share
        # in shadow (or audited): the requests the gate refused but that were admitted anyway
        self.would_refuse: set[int] = set()
        # in shadow: why the gate would have refused each of those (rule and forecast)
        self.judgements: dict[int, Judgement] = {}
        self.shed = 0
        self._states: list[ReplicaState] = []
        self._index: dict[str, int] = {}
        self._queries: dict[int, RouteQuery] = {}
        self._default_model = ""

    def install_plan(self, plan: Plan | None) -> None:
        """Swap in ``plan`` (its tenants' guaranteed shares weigh the gate's credit counters)."""
        self.path.install_plan(plan)
        if self.gate is not None and plan is not None and plan.tenants:
            self.gate.set_credits({t.tenant: t.guaranteed_share for t in plan.tenants})

    def _register(self, replicas: Sequence[ReplicaView]) -> None:
        self._states = [
            ReplicaState(
                id=v.id,
                address=v.id,
                model=v.model,
                accelerator=v.accelerator,
                tp=v.tp,
                kv_capacity_tokens=v.kv_capacity_tokens,
                scraped_at=-1.0,
                max_loras=v.max_loras,
            )
            for v in replicas
        ]
        self._index = {v.id: v.index for v in replicas}
        self._default_model = replicas[0].model if replicas else ""
        self.path.set_replicas(self._states)

    def _sync(self, replicas: Sequence[ReplicaView]) -> None:
        moved = False
        for v, s in zip(replicas, self._states, strict=True):
            # a replica changing base model takes nothing until it serves its new one
            s.healthy = v.healthy and not v.loading
            if v.model != s.model or v.kv_capacity_tokens != s.kv_capacity_tokens:
                s.model = v.model
                s.kv_capacity_tokens = v.kv_capacity_tokens
                s.tpot_s = 0.0
                moved = True
            if v.scraped_at_s != s.scraped_at:
                s.scraped_at = v.scraped_at_s
                s.num_requests_running = v.num_running
                s.num_requests_waiting = v.num_waiting
                s.kv_cache_usage_perc = v.kv_usage
                if v.max_loras > 0:
                    s.running_lora_adapters = v.running_adapters
                    s.waiting_lora_adapters = v.waiting_adapters
                s.first_tokens_at_scrape = s.first_tokens
                self.path.scraped(s)
        if moved:  # the pools changed: the route path re-indexes them
            self.path.set_replicas(self._states)

    def route(self, req: Request, replicas: Sequence[ReplicaView], now: float) -> int:
        if len(self._states) != len(replicas):
            self._register(replicas)
        self._sync(replicas)
        if self.priorities is not None:
            req.priority = self.priorities.of(req.tenant, req.request_class)
        query = RouteQuery(
            tenant=req.tenant,
            model=req.model or self._default_model,
            request_class=req.request_class,
            block_hashes=req.block_hashes,
            input_tokens=req.input_tokens,
            max_output_tokens=req.output_tokens,
            adapter=req.adapter,
            priority=req.priority,
        )
        try:
            decision = self.path.decide(query, now)
        except NoReplica:
            return -1
        gate = self.gate
        if gate is not None:
            admitted = gate.admit_decision(self.path, query, decision, now)
            if admitted is None and (self.shadow or self.audited(req.id)):
                self.would_refuse.add(req.id)
                self.judgements[req.id] = gate.last
                # admitted after all, where the gate judged it: where it would have gone had
                # it been admitted (the second look's replica when it went there, not the
                # route path's first choice)
                if gate.last_decision is not None:
                    decision = gate.last_decision
                seen = gate.forecast(self.path, query, decision, now)
                gate.dispatched(
                    decision.replica_id,
                    query,
                    now,
                    seen,
                    state=self.path.replica(decision.replica_id),
                    cached_tokens=decision.cached_tokens,
                )
            elif admitted is None:
                self.shed += 1
                return -1
            else:
                decision = admitted
        self.path.on_dispatch(decision, query, now)
        self._queries[req.id] = query
        return self._index[decision.replica_id]

    def audited(self, request_id: int) -> bool:
        """Whether a refusal of ``request_id`` is admitted for the audit: a fixed hash of the
        id below :attr:`audit_share`, so every run of a trace audits the same requests."""
        if self.audit_share <= 0.0:
            return False
        return (request_id * 2654435761) % 2**32 < self.audit_share * 2**32

    def on_first_token(self, req: Request, replica: ReplicaView, now: float) -> None:
        query = self._queries.get(req.id)
        if query is not None:
            self.path.on_first_token(replica.id, query, now)
            if self.gate is not None:
                self.gate.first_token(query, now)

    def on_complete(self, req: Request, replica: ReplicaView, now: float) -> None:
        query = self._queries.pop(req.id, None)
        if query is not None:
            self.path.on_complete(
                replica.id, query, now, ok=not req.error, output_tokens=req.output_tokens
            )
            if self.gate is not None:
                self.gate.finished(req.tenant, 0 if req.error else req.output_tokens, query, now)


def build(ctx: PolicyContext) -> PlacementPolicy:
    """The route path with the settings' route profile (default profile when None), its prefix
    block size set to ``ctx.block_tokens``, the settings' plan installed, and the SLO gate
    when one is set."""
    cfg = ctx.settings_for(NAME, PlacementSettings)
    profile = dataclasses.replace(load_profile(cfg.route_profile), block_tokens=ctx.block_tokens)
    gate = None
    if cfg.slo_gate is not None:
        gate = SloGate(
            cfg.classes,
            headroom=cfg.slo_gate.headroom,
            credit_cut=cfg.slo_gate.credit_cut,
            overload_refuse_at=cfg.slo_gate.overload_refuse_at,
            strict_refuse_at=cfg.slo_gate.strict_refuse_at,
            strict_credit_cut=cfg.slo_gate.strict_credit_cut,
            shed_factor=cfg.slo_gate.shed_factor,
            charge=cfg.slo_gate.charge,
            cold_move_ttft_share=cfg.slo_gate.cold_move_ttft_share,
            credit_slack=cfg.slo_gate.credit_slack,
            credit_reserve=cfg.slo_gate.credit_reserve,
            tpot_by_work=cfg.slo_gate.tpot_by_work,
            tpot_computed=cfg.slo_gate.tpot_computed,
            tpot_shed_from=cfg.slo_gate.tpot_shed_from,
            pressure_by_model=cfg.slo_gate.pressure_by_model,
            share_cap=cfg.slo_gate.share_cap,
            share_window_s=cfg.slo_gate.share_window_s,
            slot_turn_s=cfg.slo_gate.slot_turn_s if cfg.slo_gate.share_cap is not None else None,
            # a slot wait read from the engine: a refusal it alone makes is for a slot
            slot_wait_from_engine=profile.slot_wait_from_engine,
        )
        gate.set_credits(cfg.credits)
    shadow = cfg.slo_gate is not None and cfg.slo_gate.shadow
    audit = cfg.slo_gate.audit_share if cfg.slo_gate is not None else 0.0
    priorities = None
    if cfg.engine_priority is not None:
        mode = cfg.engine_priority
        if mode == CREDIT and (gate is None or not cfg.credits):
            # no credits, or no gate to count them (ablations): every tenant stands alike
            mode = CLASS
        standing = gate.vtc.over_credit if gate is not None else None
        priorities = EnginePriority(cfg.classes, mode=mode, standing=standing)
    policy = PlacementPolicy(
        PlacementRoutePath(profile=profile, by_priority=priorities is not None),
        gate,
        shadow=shadow,
        audit_share=audit,
        priorities=priorities,
    )
    policy.install_plan(cfg.plan)
    return policy
