"""The solver instance: data only (no variables), as numpy arrays the model builder vectorises.

Index spaces: replicas ``r``, replica kinds ``k`` (accelerator, model, TP), models ``m``,
tenants ``t``, request classes ``c`` and demand units ``d`` (:mod:`placement.solver.demand`).
``capacity[d, k]`` is the capacity at SLO (req/s) of one replica of kind ``k`` for unit ``d``
alone, at ``d``'s class SLO and ``d``'s uncached prompt (``capacity_cold``: the whole prompt,
for a group's traffic served where its prefix is not kept warm); 0 where ``k`` does not serve
``d``'s model or the SLO cannot hold even at zero load.

**Credits in req/s.** A tenant's guaranteed share and burst cap are shares of the capacity of
the model pools it uses, for its own mix: in pool ``m``, ``guaranteed_rps = credit_share ·
C_m(t)`` with ``C_m(t)`` the pool's capacity at SLO for ``t``'s demand mix there. The floor
applies to non-sheddable demand, ``min(non-sheddable demand, guaranteed_rps)``; the cap to all
served traffic, ``burst_cap · C_m(t)``. Per pool, so pools are solved independently.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from models.capacity import Slo
from placement.domain.fleet import Fleet
from placement.domain.requests import DEFAULT_CLASSES, RequestClass, Tenant
from placement.errors import InputError
from placement.solver.arrivals import arrival_counts
from placement.solver.capacity import CapacitySource, class_slos, default_capacity
from placement.solver.demand import RequestLike, aggregate_demand, window_span
from placement.solver.prefix_groups import DEFAULT_RULE, GroupRule

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

# Share of a replica's KV cache the plan may fill with warm prefixes; the rest holds the
# running sequences the capacity at SLO assumes.
WARM_KV_SHARE = 0.5


@dataclass(frozen=True, slots=True, kw_only=True)
class Instance:
    fleet: str
    capacity_source: str
    window_s: float
    # replicas
    replica_ids: tuple[str, ...]
    replica_kind: IntArray  # r → k
    replica_model: IntArray  # r → m
    replica_cost: FloatArray  # $/h
    replica_kv_budget: FloatArray  # tokens the plan may keep warm
    replica_healthy: BoolArray
    replica_group: tuple[str, ...]  # the fleet's name for the replica's group ("h100")
    # kinds and models
    kind_accelerator: tuple[str, ...]
    kind_tp: IntArray
    kind_cost: FloatArray  # $/h of one replica of the kind
    models: tuple[str, ...]
    # tenants and classes
    tenants: tuple[str, ...]
    credit_share: FloatArray
    burst_cap: FloatArray
    tenant_weight: FloatArray
    classes: tuple[str, ...]
    class_priority: IntArray
    class_sheddable: BoolArray
    class_slo: tuple[Slo, ...]
    # demand units
    unit_tenant: IntArray
    unit_model: IntArray
    unit_class: IntArray
    unit_key: IntArray  # group key, -1 for defaults
    unit_depth: IntArray
    unit_rate: FloatArray  # req/s
    unit_input: FloatArray  # mean prompt tokens
    unit_output: FloatArray
    unit_prefix: FloatArray  # tokens a warm replica skips (0 for defaults)
    capacity: FloatArray  # [d, k] req/s, prefix warm (uncached prompt)
    capacity_cold: (
        FloatArray  # [d, k] req/s, prefix not warm (whole prompt; = capacity for defaults)
    )
    # demand no healthy replica kind can serve at its SLO even unloaded: False (default) makes
    # a guarantee over it infeasible and explained; True sheds it as best effort (it counts
    # as shed in the plan's outcomes and in no tenant's floor) — a closed loop must always
    # get a plan, and no capacity of the fleet's kinds would fix such demand
    shed_unreachable: bool = False
    # tenants the caller declared (a plan lists each, demand or not); empty: none known
    declared_tenants: frozenset[str] = frozenset()
    # what the attainment model reads of the requests behind the unit means: the prompts'
    # squared coefficient of variation, and each unit's arrivals per bin of ``arrival_bin_s``
    # over the window (:mod:`placement.solver.arrivals`); empty (synthetic instances): Poisson
    unit_prompt_scv: FloatArray = field(default_factory=lambda: np.zeros(0))
    unit_arrivals: FloatArray = field(default_factory=lambda: np.zeros((0, 0)))
    arrival_bin_s: float = 0.0
    # serves[r, c]: whether replica r may serve class c (:mod:`placement.solver.chunk_split`:
    # kinds whose prompt chunk breaks a class's TPOT serve it apart from looser classes);
    # empty: every replica serves every class
    replica_classes: BoolArray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.bool_))

    def serves(self, unit: IntArray, replica: IntArray) -> BoolArray:
        """Per pair, whether ``replica`` may serve ``unit``'s class."""
        if self.replica_classes.size == 0:
            return np.ones(len(unit), dtype=np.bool_)
        out: BoolArray = self.replica_classes[replica, self.unit_class[unit]]
        return out

    @property
    def n_replicas(self) -> int:
        return len(self.replica_ids)

    @property
    def n_units(self) -> int:
        return len(self.unit_rate)

    @property
    def n_groups(self) -> int:
        return len({(t, k) for t, k in zip(self.unit_tenant, self.unit_key, strict=True) if k >= 0})

    def digest(self) -> str:
        """A short digest of everything the plan depends on (for ``inputs_digest``)."""
        h = hashlib.sha256()
        h.update("|".join(self.replica_ids).encode())
        h.update(self.replica_healthy.tobytes())
        h.update("|".join(self.tenants).encode())
        for a in (self.unit_tenant, self.unit_class, self.unit_key, self.unit_model):
            h.update(np.ascontiguousarray(a).tobytes())
        for f in (self.unit_rate, self.unit_input, self.unit_output, self.capacity):
            h.update(np.round(f, 6).tobytes())
        h.update(np.round(self.credit_share, 6).tobytes())
        return h.hexdigest()[:16]

    def pool_capacity(self, d: IntArray) -> FloatArray:
        """``C_m(d)``: capacity at SLO of the healthy replicas of each unit's model pool."""
        healthy = self.replica_healthy
        counts = np.zeros((len(self.models), len(self.kind_accelerator)))
        np.add.at(counts, (self.replica_model[healthy], self.replica_kind[healthy]), 1.0)
        out: FloatArray = (self.capacity[d] * counts[self.unit_model[d]]).sum(axis=1)
        return out

    def unreachable(self, d: IntArray) -> BoolArray:
        """Units no healthy replica kind of their pool serves at SLO, even unloaded."""
        healthy = self.replica_healthy
        serves = np.zeros((len(self.models), len(self.kind_accelerator)), dtype=np.bool_)
        serves[self.replica_model[healthy], self.replica_kind[healthy]] = True
        reachable = ((self.capacity[d] > 0) & serves[self.unit_model[d]]).any(axis=1)
        return np.logical_not(reachable)

    def tenant_credits(self, model: int) -> tuple[FloatArray, FloatArray]:
        """Per tenant, the floor and cap (req/s) in one model pool (see the module docstring)."""
        n_t = len(self.tenants)
        d = np.flatnonzero(self.unit_model == model)
        rate = self.unit_rate[d]
        t = self.unit_tenant[d]
        demand = np.bincount(t, rate, n_t)
        guarded = ~self.class_sheddable[self.unit_class[d]]
        if self.shed_unreachable:
            guarded &= ~self.unreachable(d)
        nonshed = np.bincount(t, rate * guarded, n_t)
        # C_m(t) for t's own mix: the rate-weighted harmonic blend of its units' capacities
        pool_cap = self.pool_capacity(d)
        load = np.bincount(t, np.where(pool_cap > 0, rate / np.maximum(pool_cap, 1e-12), 0), n_t)
        mix_cap = np.where(load > 0, demand / np.maximum(load, 1e-12), 0.0)
        floor = np.minimum(nonshed, self.credit_share * mix_cap)
        cap = self.burst_cap * mix_cap
        return floor, np.maximum(cap, floor)


def _uncached(units_input: float, prefix: float) -> float:
    return max(units_input - prefix, 1.0)


def build_instance(
    fleet: Fleet,
    requests: Iterable[RequestLike],
    tenants: Mapping[str, Tenant],
    classes: Mapping[str, RequestClass] = DEFAULT_CLASSES,
    *,
    window_s: float | None = None,
    capacity: CapacitySource | None = None,
    block_tokens: int = 512,
    unhealthy: Iterable[str] = (),
    rule: GroupRule = DEFAULT_RULE,
    warm_kv_share: float = WARM_KV_SHARE,
    shed_unreachable: bool = False,
) -> Instance:
    """Aggregate a window of requests against a fleet into an :class:`Instance`.

    ``window_s`` defaults to the span of the arrivals; ``capacity`` to the promoted predictor
    or the roofline prior (one table per replica kind); ``shed_unreachable`` see
    :attr:`Instance.shed_unreachable`. Tenants the requests name but
    ``tenants`` lacks get no guarantee and no cap (credit 0, cap 1).
    """
    reqs: Sequence[RequestLike] = list(requests)
    window = window_s if window_s is not None else window_span(reqs)
    # the default tables at every class's own SLO level (a class tighter than the defaults too)
    source = capacity if capacity is not None else default_capacity(class_slos(classes))
    models = sorted(fleet.models)
    default_model = models[0] if len(models) == 1 else None
    units = aggregate_demand(
        reqs, window_s=window, block_tokens=block_tokens, default_model=default_model, rule=rule
    )
    all_models = tuple(sorted(set(models) | {u.model for u in units}))
    tenant_names = tuple(sorted(set(tenants) | {u.tenant for u in units}))
    for u in units:
        if u.request_class not in classes:
            raise InputError(
                f"request class {u.request_class!r} is not defined",
                field="request_class",
                expected="one of " + ", ".join(sorted(classes)),
            )
    class_names = tuple(sorted(classes, key=lambda c: (classes[c].priority, c)))
    dead = set(unhealthy)
    unknown = dead - {r.id for r in fleet.replicas}
    if unknown:
        raise InputError(
            f"unknown replica {sorted(unknown)[0]!r}", field="unhealthy", expected="fleet ids"
        )

    kinds: list[tuple[str, str, int]] = []
    kind_cost: list[float] = []
    replica_kind = []
    for r in fleet.replicas:
        k = (r.accelerator.kind, r.model.name, r.tp)
        if k not in kinds:
            kinds.append(k)
            kind_cost.append(r.cost_per_hour)
        replica_kind.append(kinds.index(k))

    cap = np.zeros((len(units), len(kinds)))
    cold = np.zeros((len(units), len(kinds)))
    for ki, (acc, model, tp) in enumerate(kinds):
        table = source.table(acc, model, tp)
        slo_idx = {
            c: table.slo_index(Slo(classes[c].ttft_slo_s, classes[c].tpot_slo_s))
            for c in class_names
        }
        for di, u in enumerate(units):
            if u.model == model:
                cap[di, ki] = table.lookup(
                    _uncached(u.mean_input_tokens, u.prefix_tokens),
                    u.output_tokens,
                    slo_idx[u.request_class],
                )
                cold[di, ki] = (
                    table.lookup(u.mean_input_tokens, u.output_tokens, slo_idx[u.request_class])
                    if u.prefix_tokens > 0
                    else cap[di, ki]
                )

    counts, bin_s = arrival_counts([u.arrivals for u in units], window)
    tenant_of = {
        name: tenants.get(name, Tenant(name=name, credit_share=0.0)) for name in tenant_names
    }
    return Instance(
        fleet=fleet.name,
        capacity_source=source.source,
        window_s=window,
        replica_ids=tuple(r.id for r in fleet.replicas),
        replica_kind=np.asarray(replica_kind, dtype=np.int64),
        replica_model=np.asarray([all_models.index(r.model.name) for r in fleet.replicas]),
        replica_cost=np.asarray([r.cost_per_hour for r in fleet.replicas], dtype=np.float64),
        replica_kv_budget=np.asarray(
            [warm_kv_share * r.kv_capacity_tokens for r in fleet.replicas], dtype=np.float64
        ),
        replica_healthy=np.asarray([r.id not in dead for r in fleet.replicas], dtype=np.bool_),
        replica_group=tuple(r.kind for r in fleet.replicas),
        kind_accelerator=tuple(k[0] for k in kinds),
        kind_tp=np.asarray([k[2] for k in kinds], dtype=np.int64),
        kind_cost=np.asarray(kind_cost, dtype=np.float64),
        models=all_models,
        tenants=tenant_names,
        credit_share=np.asarray([tenant_of[t].credit_share for t in tenant_names]),
        burst_cap=np.asarray([tenant_of[t].burst_cap for t in tenant_names]),
        tenant_weight=np.asarray([tenant_of[t].weight for t in tenant_names]),
        classes=class_names,
        class_priority=np.asarray([classes[c].priority for c in class_names], dtype=np.int64),
        class_sheddable=np.asarray([classes[c].sheddable for c in class_names], dtype=np.bool_),
        class_slo=tuple(Slo(classes[c].ttft_slo_s, classes[c].tpot_slo_s) for c in class_names),
        unit_tenant=np.asarray([tenant_names.index(u.tenant) for u in units], dtype=np.int64),
        unit_model=np.asarray([all_models.index(u.model) for u in units], dtype=np.int64),
        unit_class=np.asarray([class_names.index(u.request_class) for u in units], dtype=np.int64),
        unit_key=np.asarray([u.key for u in units], dtype=np.int64),
        unit_depth=np.asarray([u.depth_blocks for u in units], dtype=np.int64),
        unit_rate=np.asarray([u.rate_rps for u in units], dtype=np.float64),
        unit_input=np.asarray([u.mean_input_tokens for u in units], dtype=np.float64),
        unit_output=np.asarray([u.output_tokens for u in units], dtype=np.float64),
        unit_prefix=np.asarray([float(u.prefix_tokens) for u in units], dtype=np.float64),
        capacity=cap,
        capacity_cold=cold,
        shed_unreachable=shed_unreachable,
        declared_tenants=frozenset(tenants),
        unit_prompt_scv=np.asarray([u.prompt_scv for u in units], dtype=np.float64),
        unit_arrivals=counts,
        arrival_bin_s=bin_s,
    )
