"""The in-process route path: plan lookup, greedy fallbacks, lock-free live state.

:class:`PlacementRoutePath` implements :class:`~serving.route.types.RoutePath`.

**Decide** (one read of the current :class:`_Routing` snapshot, then no shared writes but an
entry's turn counter):

1. the model's pool must exist, else :class:`UnservedModel` (a :class:`NoReplica`);
2. no plan installed → the profile's ``no_plan`` fallback (``fallback:no-plan``);
3. walk the request's block hashes from the deepest (at most the plan's deepest group) to the
   shallowest; the first hash that keys a group of the request's model is its entry; else the
   (tenant, model) default; else the ``unseen_prefix`` fallback (``fallback:unseen-prefix``),
   or for a prompt with no full block the ``no_prefix`` one (``fallback:no-prefix``);
4. pick a primary by weight (:mod:`serving.route.compiled`); if the profile's filters refuse
   it, try the entry's other primaries in turn (still ``plan``);
5. every primary refused: when the weight-chosen one was over its cap and the profile spills,
   the first admitted secondary (``fallback:spill``); else the ``planned_unavailable`` fallback
   labelled with the refusing filter's cause (``fallback:unhealthy|stale|over-cap``).

A fallback picker ranks admitted candidates; if it finds none, it is asked again with only the
health filter applied (stale or loaded beats nothing); if still none, :class:`NoReplica`.

**Live state.** :class:`ReplicaState` attributes are written by single writers (the scraper for
health and metrics; the hooks here for ``in_flight`` / ``in_flight_prefill_tokens``) and read
without locks. The hooks key open requests by the identity of their :class:`RouteQuery`, so
callers pass the same query object to ``on_dispatch``, ``on_first_token`` and ``on_complete``.
Plan installs and fleet changes build a new snapshot and swap one reference; a decision carries
the version of the snapshot it read.
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from placement.plan import Plan, ReplicaPlan
from serving.route.adapter_slots import SlotBook
from serving.route.compiled import GOLDEN_FRACTION, CompiledPlan, PlanEntry, compile_plan
from serving.route.decision import make_decision
from serving.route.engine_slots import EngineSlots
from serving.route.fleet import FleetView
from serving.route.plugins.base import FallbackContext, FallbackPicker, queued_prefill_tokens
from serving.route.plugins.pickers.least_predicted_ttft_picker import LeastPredictedTtftPicker
from serving.route.prefix_index import RouterPrefixIndex
from serving.route.profile import RouteProfile, load_profile
from serving.route.types import Decision, NoReplica, ReplicaState, RouteQuery, UnservedModel
from serving.route.waiting_queue import first_token, price_dispatch

PLAN = "plan"
SPILL = "fallback:spill"
UNSEEN_PREFIX = "fallback:unseen-prefix"
NO_PREFIX = "fallback:no-prefix"
NO_PLAN = "fallback:no-plan"
FASTEST = "fallback:fastest"
TPOT_ALPHA = 0.2  # weight of one completion in a replica's observed TPOT
_INF = float("inf")
_NO_SLOT_WAIT = (0.0, 0)  # a request for the base model, or a replica keeping no slot book
_NO_ADAPTERS: dict[str, object] = {}
_NOT_HELD: frozenset[int] = frozenset()
PREFIX_SIGNAL = "router prefix index"  # pickers reading it get the prefix holders first


@dataclass(frozen=True, slots=True)
class _Routing:
    """Everything a decision reads, swapped as one reference."""

    fleet: FleetView
    plan: CompiledPlan | None
    cap_in_flight: list[float]


class PlacementRoutePath:
    """The route path over ``replicas`` (live states), configured by ``profile``.

    ``by_priority``: the replicas schedule their waiting requests by the priority each is sent
    with (vLLM ``--scheduling-policy priority``): each replica's prompt tokens not yet past
    their first token are kept by priority too (``ReplicaState.prefill_tokens_by_priority``),
    so that a forecast counts only what is queued ahead of a request of its priority."""

    def __init__(
        self,
        replicas: Sequence[ReplicaState] = (),
        *,
        profile: RouteProfile | None = None,
        by_priority: bool = False,
    ) -> None:
        self.profile = profile if profile is not None else load_profile()
        self.by_priority = by_priority
        p = self.profile
        self._filters = p.filters
        self._checks = tuple((f.admits, f.cause) for f in p.filters)  # bound once, not per call
        self._health = tuple(f for f in p.filters if f.cause == "unhealthy")
        load_cap = p.load_cap
        self._cap_of: Callable[[ReplicaPlan], float] = (
            load_cap.cap_of if load_cap is not None else (lambda _: _INF)
        )
        self._spill = p.spill_to_secondary
        self._scored = p.plan_picker in ("scored", "warm", "planned")
        self._warm_only = p.plan_picker == "warm"
        self._planned_only = p.plan_picker == "planned"
        self._reasons = {f.cause: f"fallback:{f.cause}" for f in p.filters}
        self._reasons.setdefault("unhealthy", "fallback:unhealthy")
        self._prefixes = RouterPrefixIndex(p.block_tokens) if p.uses_prefix_index else None
        self._fastest = LeastPredictedTtftPicker()
        self._price_waiting = p.price_waiting
        self._waiting_since_scrape = p.waiting_since_scrape
        self._slot_rate_censored = p.slot_rate_censored
        self._slot_wait_from_engine = p.slot_wait_from_engine
        # id(query) -> (replica id, prefill tokens not yet past first token, first-token time)
        self._open: dict[int, tuple[str, int, float]] = {}
        # replica id -> the LoRA adapters last sent there, least recent first (at most its
        # max_loras: the router's estimate of what its slots hold)
        self._adapters_seen: dict[str, OrderedDict[str, None]] = {}
        # replica id -> adapter -> requests for it in flight there (the router's own count)
        self._adapters_in_flight: dict[str, dict[str, int]] = {}
        # replica id -> its live adapters, which hold its LoRA slots and which wait for one
        self._slots: dict[str, SlotBook] = {}
        # replica id -> its LoRA slot handovers as its engine's scrapes list them
        self._engine_slots: dict[str, EngineSlots] = {}
        self._writer = threading.Lock()  # serialises installs; never taken by decide()
        self._plan: Plan | None = None
        self._routing = self._snapshot(FleetView(replicas, virtual_nodes=p.virtual_nodes), None)

    # ---- control plane ------------------------------------------------------------------
    def _snapshot(self, fleet: FleetView, plan: Plan | None) -> _Routing:
        if plan is None:
            return _Routing(fleet, None, [_INF] * len(fleet))
        compiled = compile_plan(
            plan, fleet, cap_of=self._cap_of, max_alternates=self.profile.max_fallbacks
        )
        return _Routing(fleet, compiled, compiled.cap_in_flight)

    def set_replicas(self, replicas: Sequence[ReplicaState]) -> None:
        """Register the fleet (replaces the previous set; recompiles the plan against it)."""
        with self._writer:
            fleet = FleetView(replicas, virtual_nodes=self.profile.virtual_nodes)
            self._routing = self._snapshot(fleet, self._plan)

    def install_plan(self, plan: Plan | None) -> None:
        with self._writer:
            routing = self._snapshot(self._routing.fleet, plan)
            self._plan = plan
            self._routing = routing

    @property
    def plan(self) -> Plan | None:
        return self._plan

    @property
    def replicas(self) -> list[ReplicaState]:
        return list(self._routing.fleet.states)

    def replica(self, replica_id: str) -> ReplicaState | None:
        fleet = self._routing.fleet
        i = fleet.index_of.get(replica_id)
        return None if i is None else fleet.states[i]

    # ---- decisions ----------------------------------------------------------------------
    def decide(self, query: RouteQuery, now: float) -> Decision:
        routing = self._routing
        fleet = routing.fleet
        plan = routing.plan
        model = query.model
        if model not in fleet.pools:
            raise UnservedModel(f"no registered replica serves model {model!r}")
        if plan is None:
            return self._fallback(routing, query, now, NO_PLAN, self.profile.no_plan, None)
        entry = _lookup(plan, query)
        if entry is None:
            if not query.block_hashes:
                return self._fallback(routing, query, now, NO_PREFIX, self.profile.no_prefix, None)
            return self._fallback(
                routing, query, now, UNSEEN_PREFIX, self.profile.unseen_prefix, None
            )
        if self._scored:
            if self._warm_only and entry.warm:
                # among the replicas the plan keeps the group's prefix warm on: the others'
                # caches hold the groups the plan packed there (the gate's second look still
                # takes a faster replica when these would miss)
                warm = entry.warm
                try:
                    return self._fallback(
                        routing, query, now, PLAN, self.profile.no_plan, entry, warm.__contains__
                    )
                except NoReplica:
                    pass
            if self._planned_only:
                # the planned replicas, then the spill: the replicas the plan chose for this
                # tenant's class (an interactive tenant's fast accelerators, a batch tenant's
                # cheap ones); the gate's second look still takes a faster one when these miss
                for tier, reason in ((entry.replicas, PLAN), (entry.secondary, SPILL)):
                    if tier:
                        try:
                            return self._fallback(
                                routing,
                                query,
                                now,
                                reason,
                                self.profile.no_plan,
                                entry,
                                tier.__contains__,
                            )
                        except NoReplica:
                            pass
            return self._fallback(routing, query, now, PLAN, self.profile.no_plan, entry)
        states = fleet.states
        caps = routing.cap_in_flight
        checks = self._checks
        replicas = entry.replicas
        n = len(replicas)
        cause = "unhealthy"  # an entry none of whose replicas is registered
        if n:
            turn = entry.turn
            entry.turn = turn + 1
            pos = bisect_right(entry.cumulative, (turn * GOLDEN_FRACTION) % 1.0)
            if (
                query.adapter
                and n > 1
                and replicas[pos] not in plan.holders.get(query.adapter, _NOT_HELD)
            ):
                # an adapter routed over replicas that do not keep it (it swaps there) starts
                # where it is live (in flight or just sent): another would load it into a slot
                pos = self._live_first(states, query.adapter, replicas, pos)
            first_cause = ""
            kept = plan.classes
            for _ in range(n):
                r = replicas[pos]
                state = states[r]
                cap = caps[r]
                refused = ""
                if kept and r in kept and query.request_class not in kept[r]:
                    refused = "over-cap"  # kept for other classes: as if full, spill
                else:
                    for admits, why in checks:
                        if not admits(state, cap, now):
                            refused = why
                            break
                if not refused:
                    return make_decision(
                        state.id,
                        state.address,
                        PLAN,
                        plan.version,
                        fleet.tables[r].ttft(
                            query.input_tokens - entry.prefix_tokens,
                            queued_prefill_tokens(state),
                        ),
                        entry.alternates[pos],
                        entry.prefix_tokens,
                        *(
                            self._slot_wait(state, query.adapter, now)
                            if query.adapter
                            else _NO_SLOT_WAIT
                        ),
                    )
                if not first_cause:
                    first_cause = refused
                pos = pos + 1 if pos + 1 < n else 0
            cause = first_cause
        if cause == "over-cap" and self._spill:
            kept = plan.classes
            for pos, r in enumerate(entry.secondary):
                if kept and r in kept and query.request_class not in kept[r]:
                    continue
                if self._admitted(states[r], caps[r], now):
                    return self._decision(
                        fleet,
                        plan,
                        r,
                        query,
                        SPILL,
                        entry.prefix_tokens,
                        entry.spill_alternates[pos],
                        now,
                    )
        return self._fallback(
            routing, query, now, self._reasons[cause], self.profile.planned_unavailable, entry
        )

    def fastest(
        self,
        query: RouteQuery,
        now: float,
        *,
        max_tpot_s: float = _INF,
        accept: Callable[[ReplicaState], bool] | None = None,
    ) -> Decision | None:
        """The admitted candidate with the least predicted TTFT among those whose observed TPOT
        is at most ``max_tpot_s`` (and that ``accept`` accepts, when given), counting the
        prefix blocks the router has seen each replica take (``fallback:fastest``); None when
        no candidate qualifies. The admission gate asks for it when the profile's choice would
        miss: a request too slow on the replica that holds its prefix may still meet its SLO
        on another."""
        routing = self._routing
        if query.model not in routing.fleet.pools:
            raise UnservedModel(f"no registered replica serves model {query.model!r}")
        states = routing.fleet.states

        def decoding_in_time(i: int) -> bool:
            state = states[i]
            return state.tpot_s <= max_tpot_s and (accept is None or accept(state))

        planned: tuple[int, ...] = ()
        if self._planned_only and routing.plan is not None:
            # the plan's replicas for the request first: a batch request late on its cheap
            # replicas is not moved onto the fast ones the plan keeps for interactive traffic
            # while one of its own would do
            entry = _lookup(routing.plan, query)
            planned = entry.replicas if entry is not None else ()
        if planned:

            def planned_in_time(i: int) -> bool:
                return i in planned and decoding_in_time(i)

            try:
                return self._fallback(
                    routing, query, now, FASTEST, self._fastest, None, accept=planned_in_time
                )
            except NoReplica:
                pass
        try:
            return self._fallback(
                routing, query, now, FASTEST, self._fastest, None, accept=decoding_in_time
            )
        except NoReplica:
            return None

    def decide_batch(self, queries: Sequence[RouteQuery], now: float) -> list[Decision | NoReplica]:
        """Decide each query in order (as :meth:`decide` would, one after another); a query
        nothing can serve yields its :class:`NoReplica` in place of a decision."""
        out: list[Decision | NoReplica] = []
        append = out.append
        decide = self.decide
        for q in queries:
            try:
                append(decide(q, now))
            except NoReplica as exc:
                append(exc)
        return out

    def _admitted(self, state: ReplicaState, cap: float, now: float) -> bool:
        # explicit loops, not all(<generator>): this runs per candidate on the hot path
        for admits, _ in self._checks:  # noqa: SIM110
            if not admits(state, cap, now):
                return False
        return True

    def _decision(
        self,
        fleet: FleetView,
        plan: CompiledPlan | None,
        r: int,
        query: RouteQuery,
        reason: str,
        cached_tokens: int,
        alternates: tuple[str, ...],
        now: float,
    ) -> Decision:
        state = fleet.states[r]
        ttft = fleet.tables[r].ttft(
            query.input_tokens - cached_tokens, queued_prefill_tokens(state)
        )
        return make_decision(
            state.id,
            state.address,
            reason,
            None if plan is None else plan.version,
            ttft,
            alternates,
            cached_tokens,
            *(self._slot_wait(state, query.adapter, now) if query.adapter else _NO_SLOT_WAIT),
        )

    def _slot_wait(self, state: ReplicaState, adapter: str, now: float) -> tuple[float, int]:
        """Seconds a request for ``adapter`` would wait for a LoRA slot on ``state`` at the
        recent release rate, and the slot handovers it would wait for: from what its engine
        listed at its scrapes where the profile says so and the engine lists them (the
        handovers the router's book counts, when more: it saw its own dispatches since the
        scrape), else from the book alone."""
        book = self._slots.get(state.id)
        engine = self._engine_slots_of(state)
        if engine is not None:
            return engine.wait(adapter, now, 0 if book is None else book.handovers(adapter))
        return _NO_SLOT_WAIT if book is None else book.wait(adapter, now)

    def _engine_slots_of(self, state: ReplicaState) -> EngineSlots | None:
        """``state``'s engine slot handovers, its last scrape read (None: the slot wait is not
        read from the engine, or its engine lists no adapters)."""
        running = state.running_lora_adapters
        if not self._slot_wait_from_engine or running is None or state.max_loras <= 0:
            return None
        engine = self._engine_slots.get(state.id)
        if engine is None:
            engine = self._engine_slots[state.id] = EngineSlots(state.max_loras)
        if state.scraped_at > engine.at:
            engine.scraped(running, state.waiting_lora_adapters, state.scraped_at)
        return engine

    def scraped(self, state: ReplicaState) -> None:
        """The scraper has just read ``state``'s gauges: with the slot wait read from the
        engine, its adapter lists are taken in now (a handover between two scrapes the route
        path never read would go uncounted)."""
        self._engine_slots_of(state)

    def _book_slots(self, state: ReplicaState, book: SlotBook) -> None:
        """Publish what waits for a slot on ``state`` (the queue signal leaves it out)."""
        (
            state.slot_waiting_requests,
            state.slot_waiting_tokens,
            state.slot_starved_since,
            state.slot_starved_tenants,
        ) = book.waiting()

    def _fallback(
        self,
        routing: _Routing,
        query: RouteQuery,
        now: float,
        reason: str,
        picker: FallbackPicker,
        entry: PlanEntry | None,
        accept: Callable[[int], bool] | None = None,
    ) -> Decision:
        fleet = routing.fleet
        states = fleet.states
        caps = routing.cap_in_flight
        preferred: tuple[int, ...] = ()
        cached: dict[int, int] = {}
        planned_warm = False
        if entry is not None:
            preferred = entry.replicas + entry.secondary
            if entry.prefix_tokens:
                # only where the plan keeps the prefix warm: crediting every planned or spare
                # replica would draw the group's traffic to replicas whose KV budget the plan
                # gave to other groups, and evict them
                cached = dict.fromkeys(entry.warm, entry.prefix_tokens)
                planned_warm = bool(entry.warm)
        # what the router has seen each replica take: the decision's cached tokens (its TTFT,
        # the gate's forecast) count only these where the router keeps an index, so a planned
        # replica that has not loaded the prefix yet (or evicted it) is judged by its cold
        # prefill; the plan's word steers the ranking, not the forecast
        seen: dict[int, int] | None = None
        if self._prefixes is not None and query.block_hashes:
            ranks_prefixes = PREFIX_SIGNAL in picker.signals
            if ranks_prefixes or planned_warm:
                seen = {}
                matches = self._prefixes.match_all(query.block_hashes)
                if matches:
                    block_tokens = self.profile.block_tokens
                    index_of = fleet.index_of
                    held: list[tuple[int, int]] = []
                    for rid, blocks in matches.items():
                        i = index_of.get(rid)
                        if i is not None:
                            held.append((-blocks, i))
                            seen[i] = blocks * block_tokens
                    if ranks_prefixes:
                        for i, tokens in seen.items():
                            cached[i] = max(cached.get(i, 0), tokens)
                        held.sort()
                        preferred = (*preferred, *(i for _, i in held))
        if seen is None or not planned_warm:
            seen = cached
        checks = self._checks
        # the replicas the plan keeps apart from the request's class (a prompt chunk there
        # breaks a tighter class's TPOT, placement.solver.chunk_split) are not candidates
        kept = routing.plan.classes if routing.plan is not None else {}
        cls = query.request_class

        def admitted(i: int) -> bool:
            state = states[i]
            cap = caps[i]
            for admits, _ in checks:
                if not admits(state, cap, now):
                    return False
            return not kept or i not in kept or cls in kept[i]

        profile = self.profile
        ctx = FallbackContext(
            query,
            fleet,
            routing.plan,
            admitted,
            preferred,
            cached,
            profile.candidates,
            profile.key_blocks,
        )
        ranked = picker.rank(ctx)
        if accept is not None:
            ranked = [i for i in ranked if accept(i)]
        if query.adapter:
            ranked = self._warm_first(routing, query.adapter, ranked, entry)
        if not ranked:
            health = self._health

            def up(i: int) -> bool:
                state = states[i]
                for f in health:  # noqa: SIM110
                    if not f.admits(state, _INF, now):
                        return False
                return True

            def up_for_class(i: int) -> bool:
                return up(i) and (not kept or i not in kept or cls in kept[i])

            # the class's own replicas first; when none is up, any healthy one
            for eligible in (up_for_class, up) if kept else (up,):
                ctx.eligible = eligible
                ranked = picker.rank(ctx)
                if accept is not None:
                    ranked = [i for i in ranked if accept(i)]
                if query.adapter:
                    ranked = self._warm_first(routing, query.adapter, ranked, entry)
                if ranked:
                    break
            if not ranked:
                raise NoReplica(f"no healthy replica serves model {query.model!r}")
        chosen = ranked[0]
        alternates = tuple([states[i].id for i in ranked[1 : 1 + self.profile.max_fallbacks]])
        return self._decision(
            fleet, routing.plan, chosen, query, reason, seen.get(chosen, 0), alternates, now
        )

    def _warm_first(
        self, routing: _Routing, adapter: str, ranked: list[int], entry: PlanEntry | None
    ) -> list[int]:
        """The ranked candidates, in rank order, of the first tier that has any, among those
        the plan routes ``adapter`` to (``entry``) when any is a candidate: those that hold it
        (requests for it in flight there, the plan keeps it resident there, or the router sent
        it there among the replica's last ``max_loras`` adapters); those with a free LoRA slot
        (fewer adapters in flight than ``max_loras``: the adapter loads without waiting); all
        of them. A swapped adapter (routed over replicas that keep none) thus stays where it
        is live, and never leaves its planned replicas for another's free slot: the plan pins
        hot adapters there and keeps the cold ones off them."""
        if entry is not None:
            planned = set(entry.replicas)
            routed = [i for i in ranked if i in planned]
            if routed:
                ranked = routed
        held = routing.plan.holders.get(adapter, frozenset()) if routing.plan else frozenset()
        states = routing.fleet.states
        seen = self._adapters_seen
        busy = self._adapters_in_flight
        warm = [
            i
            for i in ranked
            if i in held
            or adapter in busy.get(states[i].id, _NO_ADAPTERS)
            or adapter in seen.get(states[i].id, _NO_ADAPTERS)
        ]
        if warm:
            return warm
        free = [
            i for i in ranked if len(busy.get(states[i].id, _NO_ADAPTERS)) < states[i].max_loras
        ]
        return free or ranked

    def _live_first(
        self, states: Sequence[ReplicaState], adapter: str, replicas: tuple[int, ...], pos: int
    ) -> int:
        """The position in ``replicas``, from ``pos`` on (wrapping), of the first replica where
        ``adapter`` is live; ``pos`` when it is live on none."""
        n = len(replicas)
        for k in range(n):
            at = (pos + k) % n
            rid = states[replicas[at]].id
            if adapter in self._adapters_in_flight.get(
                rid, _NO_ADAPTERS
            ) or adapter in self._adapters_seen.get(rid, _NO_ADAPTERS):
                return at
        return pos

    # ---- outcome hooks ------------------------------------------------------------------
    def on_dispatch(self, decision: Decision, query: RouteQuery, now: float) -> None:
        fleet = self._routing.fleet
        i = fleet.index_of.get(decision.replica_id)
        if i is None:
            return
        state = fleet.states[i]
        if query.adapter:
            seen = self._adapters_seen.setdefault(decision.replica_id, OrderedDict())
            seen[query.adapter] = None
            seen.move_to_end(query.adapter)
            while len(seen) > max(state.max_loras, 1):
                seen.popitem(last=False)
            busy = self._adapters_in_flight.setdefault(decision.replica_id, {})
            busy[query.adapter] = busy.get(query.adapter, 0) + 1
            if state.max_loras > 0:
                book = self._slots.get(decision.replica_id)
                if book is None:
                    book = self._slots[decision.replica_id] = SlotBook(
                        state.max_loras, censored=self._slot_rate_censored
                    )
                book.dispatched(query.adapter, query.input_tokens, tenant=query.tenant, now=now)
                self._book_slots(state, book)
        state.in_flight += 1
        state.in_flight_prefill_tokens += query.input_tokens
        if self._price_waiting:
            price_dispatch(state, query.input_tokens - decision.cached_tokens)
        if self.by_priority:
            split = state.prefill_tokens_by_priority
            split[query.priority] = split.get(query.priority, 0) + query.input_tokens
        fleet.pool_in_flight[fleet.pool_of[i]] += 1
        self._open[id(query)] = (decision.replica_id, query.input_tokens, -1.0)
        if self._prefixes is not None:
            self._prefixes.insert(
                decision.replica_id, state.kv_capacity_tokens, query.block_hashes, now
            )

    def on_first_token(self, replica_id: str, query: RouteQuery, now: float) -> None:
        key = id(query)
        record = self._open.get(key)
        if record is None or record[2] >= 0:
            return
        state = self.replica(record[0])
        if state is not None:
            state.in_flight_prefill_tokens -= record[1]
            if self._waiting_since_scrape:
                first_token(state)
            if self.by_priority:
                _unqueue(state, query.priority, record[1])
            book = self._slots.get(record[0]) if query.adapter else None
            if book is not None:
                book.first_token(query.adapter, record[1])
                self._book_slots(state, book)
        self._open[key] = (record[0], 0, now)

    def on_complete(
        self,
        replica_id: str,
        query: RouteQuery,
        now: float,
        *,
        ok: bool,
        output_tokens: int | None = None,
    ) -> None:
        record = self._open.pop(id(query), None)
        if record is None:
            return
        if query.adapter:
            busy = self._adapters_in_flight.get(record[0], {})
            left = busy.get(query.adapter, 0) - 1
            if left > 0:
                busy[query.adapter] = left
            else:
                busy.pop(query.adapter, None)
        fleet = self._routing.fleet
        i = fleet.index_of.get(record[0])
        if i is None:
            return
        state = fleet.states[i]
        book = self._slots.get(record[0]) if query.adapter else None
        if book is not None:
            book.completed(query.adapter, record[1], now)
            self._book_slots(state, book)
        state.in_flight -= 1
        state.in_flight_prefill_tokens -= record[1]
        if self.by_priority and record[1]:
            _unqueue(state, query.priority, record[1])
        fleet.pool_in_flight[fleet.pool_of[i]] -= 1
        first_token_at = record[2]
        if state.in_flight == 0:
            state.tpot_s = 0.0  # an idle replica decodes at its best
        elif ok and output_tokens is not None and output_tokens > 1 and first_token_at >= 0:
            tpot = (now - first_token_at) / (output_tokens - 1)
            state.tpot_s += TPOT_ALPHA * (tpot - state.tpot_s)


def _unqueue(state: ReplicaState, priority: int, tokens: int) -> None:
    """``tokens`` of a request of ``priority`` are no longer queued for their first token."""
    split = state.prefill_tokens_by_priority
    left = split.get(priority, 0) - tokens
    if left > 0:
        split[priority] = left
    else:
        split.pop(priority, None)


def _lookup(plan: CompiledPlan, query: RouteQuery) -> PlanEntry | None:
    """The plan's entry for ``query``: the deepest prefix group of its model on its chain, else
    its adapter's or its (tenant, model) default; None when the plan does not cover it."""
    hashes = query.block_hashes
    groups = plan.groups
    # an adapter's KV differs from the base model's: its requests match no prefix group
    depth = 0 if query.adapter else min(len(hashes), plan.max_depth)
    if depth:
        model = query.model
        # deepest first; the lookups run in C, only the groups found come back to Python
        for found in filter(None, map(groups.get, hashes[depth - 1 :: -1])):
            if found.model == model:
                return found
    if query.adapter:
        return plan.adapters.get((query.tenant, query.adapter))
    return plan.defaults.get((query.tenant, query.model))
