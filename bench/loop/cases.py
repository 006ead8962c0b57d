"""The benchmark's cases from CLI text: workloads × fleets, each trace cut to its default span.

Default spans keep a full run within minutes on two cores: the whole Mooncake slice (2,100 s),
30 minutes of the mixed populations (~28k requests), 10 minutes of the synthetic tenants and
20 minutes of kv-bound (~6.5k requests), 15 minutes of multi-model and of tiers.
"""

from __future__ import annotations

from pathlib import Path

from bench.loop.run import Case
from bench.loop.warmup import check_warm_up
from placement.domain.fleet import Fleet, load_fleet
from placement.domain.tenancy import load_tenancy
from placement.errors import InputError
from serving.admission.engine_priority import MODES as PRIORITY_MODES
from serving.admission.share_cap import DEFAULT_SHARE_WINDOW_S, ShareCap
from serving.admission.slo_gate import DEFAULT_SLOT_TURN_S
from sim.workloads.base import Workload
from sim.workloads.registry import WORKLOADS, load_mixed, load_workload
from sim.workloads.tenant_mix import tenant_mix
from sim.workloads.tiers import TIERS_FLEET
from sim.workloads.trace_file import load_trace_file, with_tenancy

DEFAULT_SPAN_S: dict[str, float | None] = {
    "mooncake": None,
    "mixed": 1800.0,
    "synthetic": 600.0,
    "kv-bound": 1200.0,
    "multi-model": 900.0,
    "tiers": 900.0,
}
# workloads that need a fleet of their own (other models, LoRA slots) run on it, whatever --fleets
OWN_FLEET: dict[str, Path] = {
    "multi-model": Path(__file__).resolve().parents[2] / "data" / "fleets" / "multimodel.yaml",
    "tiers": TIERS_FLEET,  # the heterogeneous fleet: the classes' choice of accelerators
}


def _names(text: str, field: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise InputError("empty list", field=field, expected="a comma list")
    return names


def build_cases(
    *,
    workloads: str,
    fleets: str,
    loads: tuple[float, ...],
    peers: tuple[str, ...],
    duration_s: float | None,
    period_s: float,
    learn: bool,
    seed: int,
    learn_less_slot_wait: bool = False,
    trace: Path | None = None,
    tenants: Path | None = None,
    engine_priority: str | None = None,
    offer_waiting_price: bool = False,
    offer_credit_reserve: bool = False,
    base_models_by_credit: bool = False,
    gate_pressure_by_model: bool = False,
    gate_tpot_computed: bool = False,
    gate_share_cap: float | None = None,
    gate_share_window_s: float = DEFAULT_SHARE_WINDOW_S,
    offer_share_cap: bool = True,
    gate_slot_turn_s: float | None = DEFAULT_SLOT_TURN_S,
    warm_up_s: float = 0.0,
) -> list[Case]:
    """Cases for every workload (or the one ``trace`` file) × fleet; ``tenants`` gives the
    workloads the tenants and classes of a tenants file — or, when its tenants name their
    ``source``, is the one workload (:mod:`sim.workloads.tenant_mix`). ``engine_priority``:
    the engines schedule by the priority ours sends (``Case.engine_priority``);
    ``offer_waiting_price``: the head tuning also tries the waiting queue's price;
    ``base_models_by_credit``: swappable replicas are placed by credit and goodput at SLO;
    ``offer_credit_reserve``: where no share cap holds, the head tuning also tries the gate's
    credit reserve;
    ``gate_pressure_by_model``: the gate's overload signals are kept per model pool;
    ``gate_tpot_computed``: the gate's TPOT forecast counts the prompt tokens computed;
    ``gate_share_cap``: past capacity the gate holds tenants to that many times their
    entitlement in their pool over ``gate_share_window_s``; ``offer_share_cap``: without a
    fixed cap, the head tuning tries one (kept where it gains and loses at no tuning load);
    ``gate_slot_turn_s``: with the share cap, a running LoRA adapter of a tenant at its share
    yields its slot to a tenant below its share waiting that long for one (None: never);
    ``warm_up_s``: each reported run first replays the head's last that many simulated
    seconds (``Case.warm_up_s``); ``learn_less_slot_wait``: the learned TTFT leaves out each
    request's wait for a LoRA slot (``Case.learn_less_slot_wait``)."""
    check_warm_up(warm_up_s)
    if gate_share_cap is not None:
        ShareCap(gate_share_cap, window_s=gate_share_window_s)  # bad values: a clear error
    if gate_slot_turn_s is not None and not gate_slot_turn_s > 0:
        raise InputError(f"{gate_slot_turn_s}", field="--gate-slot-turn-s", expected="> 0")
    if not peers:
        raise InputError("no peer policy to compare with", field="--peers")
    if engine_priority is not None and engine_priority not in PRIORITY_MODES:
        raise InputError(
            f"{engine_priority!r}", field="--engine-priority", expected=" or ".join(PRIORITY_MODES)
        )
    fleet_list = [load_fleet(Path(f)) for f in _names(fleets, "--fleets")]
    tenancy = load_tenancy(tenants) if tenants is not None else None
    if trace is not None:
        loaded = [load_trace_file(trace)]
        if duration_s is not None:
            loaded = [loaded[0].window(0.0, duration_s)]
    elif tenancy is not None and tenancy.sources and tenants is not None:
        # a tenant mix: the tenants file is the workload (each tenant sends its source's)
        mix = tenant_mix(tenancy, name=tenants.stem, seed=seed, duration_s=duration_s)
        loaded, tenancy = [mix], None
    else:
        loaded = [
            _named_workload(name, seed=seed, duration_s=duration_s)
            for name in _names(workloads, "--workloads")
        ]
    if tenancy is not None:
        loaded = [with_tenancy(w, tenancy, seed=seed) for w in loaded]
    return [
        Case(
            workload=workload,
            fleet=fleet,
            peers=peers,
            loads=loads,
            period_s=period_s,
            learn=learn,
            learn_less_slot_wait=learn_less_slot_wait,
            seed=seed,
            engine_priority=engine_priority,
            offer_waiting_price=offer_waiting_price,
            offer_credit_reserve=offer_credit_reserve,
            base_models_by_credit=base_models_by_credit,
            gate_pressure_by_model=gate_pressure_by_model,
            gate_tpot_computed=gate_tpot_computed,
            gate_share_cap=gate_share_cap,
            gate_share_window_s=gate_share_window_s,
            offer_share_cap=offer_share_cap,
            gate_slot_turn_s=gate_slot_turn_s,
            warm_up_s=warm_up_s,
        )
        for workload in loaded
        for fleet in _fleets_for(workload, fleet_list)
    ]


def _fleets_for(workload: Workload, fleets: list[Fleet]) -> list[Fleet]:
    own = OWN_FLEET.get(workload.name)
    return [load_fleet(own)] if own is not None else fleets


def _named_workload(name: str, *, seed: int, duration_s: float | None) -> Workload:
    """A shipped workload by name; ``mixed:CATEGORY/MODEL`` picks the ServeGen population."""
    base, _, variant = name.partition(":")
    if base not in WORKLOADS:
        raise InputError(
            f"unknown workload {name!r}", field="--workloads", expected=", ".join(WORKLOADS)
        )
    span = duration_s if duration_s is not None else DEFAULT_SPAN_S.get(base, 600.0)
    if not variant:
        return load_workload(base, seed=seed, duration_s=span)
    category, _, model = variant.partition("/")
    if base != "mixed" or not category or not model:
        raise InputError(
            f"unknown workload {name!r}",
            field="--workloads",
            expected="a name, or mixed:CATEGORY/MODEL (a ServeGen population)",
        )
    return load_mixed(seed=seed, duration_s=span, category=category, model=model)
