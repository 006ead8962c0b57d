"""A plan compiled for lookups: prefix groups and defaults as dict entries over replica indices.

:func:`compile_plan` runs once per installed plan (and per fleet change); the route path then
swaps one reference. Each :class:`PlanEntry` holds its primaries' cumulative weights and a turn
counter: pick *t* of an entry takes the primary whose cumulative-weight interval holds
``frac(t·φ⁻¹)`` (a Weyl sequence: deterministic, and the shares converge to the weights with
error O(log t / t), far faster than random draws). Replicas the plan names but the fleet does
not have are dropped and the weights renormalised; an entry left empty routes by fallback.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from placement.plan import Plan, ReplicaPlan, Route
from serving.route.fleet import FleetView

GOLDEN_FRACTION = 0.6180339887498949  # φ⁻¹: the Weyl step with the most even spread
_TURN_SEED_MASK = 0xFFFF


class PlanEntry:
    """One lookup target: a prefix group (``prefix_tokens`` > 0) or a (tenant, model) default.

    ``alternates[j]`` are the replica ids a proxy should try after primary ``j`` (the other
    primaries, then the secondaries); ``spill_alternates[k]`` likewise after secondary ``k``.
    ``turn`` is written on the hot path without a lock: a lost increment under a race only
    repeats one position of the sequence. ``warm``: the replicas the plan keeps the group's
    prefix warm on (within their KV budgets); the others serve it cold.
    """

    __slots__ = (
        "alternates",
        "cumulative",
        "model",
        "prefix_tokens",
        "replicas",
        "secondary",
        "spill_alternates",
        "turn",
        "warm",
    )

    def __init__(
        self,
        *,
        model: str,
        replicas: tuple[int, ...],
        cumulative: tuple[float, ...],
        secondary: tuple[int, ...],
        prefix_tokens: int,
        ids: Sequence[str],
        max_alternates: int,
        turn: int,
        warm: tuple[int, ...] = (),
    ) -> None:
        self.model = model
        self.warm = warm
        self.replicas = replicas
        self.cumulative = cumulative
        self.secondary = secondary
        self.prefix_tokens = prefix_tokens
        self.turn = turn
        order = [ids[i] for i in (*replicas, *secondary)]
        self.alternates = tuple(
            tuple(x for x in order if x != ids[i])[:max_alternates] for i in replicas
        )
        spill = [ids[i] for i in secondary]
        self.spill_alternates = tuple(
            tuple(x for x in spill if x != ids[i])[:max_alternates] for i in secondary
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class CompiledPlan:
    """``groups`` by deepest block hash; ``max_depth`` bounds the walk down a request's chain;
    ``cap_in_flight[i]`` is replica ``i``'s in-flight cap (``inf`` when the plan has none)."""

    version: int
    groups: dict[int, PlanEntry]
    max_depth: int
    defaults: dict[tuple[str, str], PlanEntry]
    cap_in_flight: list[float]
    # LoRA: (tenant, adapter) → its entry; adapter → replicas the plan keeps it resident on
    adapters: dict[tuple[str, str], PlanEntry] = field(default_factory=dict)
    holders: dict[str, frozenset[int]] = field(default_factory=dict)
    # replica index → the request classes the plan keeps it to (absent: every class)
    classes: dict[int, frozenset[str]] = field(default_factory=dict)


def _entry(
    route: Route,
    *,
    model: str,
    prefix_tokens: int,
    fleet: FleetView,
    max_alternates: int,
    turn: int,
    warm: tuple[str, ...] = (),
) -> PlanEntry:
    pairs = [
        (fleet.index_of[r], w)
        for r, w in zip(route.replicas, route.weights, strict=True)
        if r in fleet.index_of
    ]
    total = sum(w for _, w in pairs)
    cumulative: list[float] = []
    running = 0.0
    for _, w in pairs:
        running += w / total
        cumulative.append(running)
    if cumulative:
        cumulative[-1] = 1.0  # float noise must not leave a gap above the last interval
    primaries = {i for i, _ in pairs}
    secondary = tuple(
        fleet.index_of[r]
        for r in route.secondary
        if r in fleet.index_of and fleet.index_of[r] not in primaries
    )
    return PlanEntry(
        model=model,
        replicas=tuple(i for i, _ in pairs),
        cumulative=tuple(cumulative),
        secondary=secondary,
        prefix_tokens=prefix_tokens,
        ids=[s.id for s in fleet.states],
        max_alternates=max_alternates,
        turn=turn,
        warm=tuple(fleet.index_of[r] for r in warm if r in fleet.index_of),
    )


def compile_plan(
    plan: Plan,
    fleet: FleetView,
    *,
    cap_of: Callable[[ReplicaPlan], float],
    max_alternates: int,
) -> CompiledPlan:
    """Compile ``plan`` against ``fleet``; ``cap_of`` turns a replica's plan into its
    in-flight cap (the load-cap filter's rule)."""
    caps = [math.inf] * len(fleet)
    for rp in plan.replicas:
        i = fleet.index_of.get(rp.id)
        if i is not None:
            caps[i] = cap_of(rp)
    groups = {
        g.key: _entry(
            g.route,
            model=g.model,
            prefix_tokens=g.prefix_tokens,
            fleet=fleet,
            max_alternates=max_alternates,
            turn=g.key & _TURN_SEED_MASK,
            warm=g.warm,
        )
        for g in plan.groups
    }
    defaults = {
        (d.tenant, d.model): _entry(
            d.route,
            model=d.model,
            prefix_tokens=0,
            fleet=fleet,
            max_alternates=max_alternates,
            turn=n,
        )
        for n, d in enumerate(plan.defaults)
    }
    adapters = {
        (a.tenant, a.adapter): _entry(
            a.route,
            model=a.model,
            prefix_tokens=0,
            fleet=fleet,
            max_alternates=max_alternates,
            turn=n,
        )
        for n, a in enumerate(plan.adapter_routes)
    }
    holders: dict[str, set[int]] = {}
    classes: dict[int, frozenset[str]] = {}
    for rp in plan.replicas:
        i = fleet.index_of.get(rp.id)
        if i is not None:
            for name in rp.adapters:
                holders.setdefault(name, set()).add(i)
            if rp.classes:
                classes[i] = frozenset(rp.classes)
    return CompiledPlan(
        version=plan.version,
        groups=groups,
        max_depth=max((g.depth_blocks for g in plan.groups), default=0),
        defaults=defaults,
        cap_in_flight=caps,
        adapters=adapters,
        holders={name: frozenset(s) for name, s in holders.items()},
        classes=classes,
    )
