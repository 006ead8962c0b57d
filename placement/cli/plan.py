"""``placement plan …``: solve, show, diff and validate plans (thin: parse, call, print)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from placement.cli.errors import user_errors
from placement.cli.profiles import ProfilesOption, use_profiles
from placement.errors import InputError
from placement.report import folding

app = typer.Typer(
    help="Solve, inspect, compare and validate placement plans.", no_args_is_help=True
)
_console = Console()


def _previous(path: Path | None) -> object:
    from placement.plan.store import DirectoryPlanStore, read_plan

    if path is None:
        return None
    if path.is_dir():
        return DirectoryPlanStore(path).latest()
    return read_plan(path)


@app.command("solve")
@user_errors
def solve(
    fleet: Annotated[Path, typer.Option(help="fleet YAML")] = Path("data/fleets/h100x8.yaml"),
    workload: Annotated[
        str, typer.Option(help="workload name (mooncake, synthetic, mixed, …)")
    ] = "synthetic",
    out: Annotated[Path, typer.Option(help="plan directory (plan-<version>.json + latest)")] = Path(
        "out/plans"
    ),
    window_s: Annotated[
        float | None, typer.Option(help="seconds of the workload to plan for")
    ] = 300.0,
    previous: Annotated[
        Path | None, typer.Option(help="previous plan file or plan directory")
    ] = None,
    time_limit: Annotated[float, typer.Option(min=0.1, help="solver time limit, s")] = 10.0,
    backend: Annotated[
        str, typer.Option(help="mathopt-highs, mathopt-glop, mathopt-pdlp, cp-sat")
    ] = "mathopt-highs",
    seed: Annotated[int, typer.Option()] = 0,
    tenants: Annotated[
        Path | None,
        typer.Option(
            help="tenants YAML (credits, classes; traffic_share splits the workload's sessions "
            "between them)"
        ),
    ] = None,
    profiles: ProfilesOption = None,
) -> None:
    """Solve a plan for a window of a workload on a fleet and publish it to --out."""
    use_profiles(profiles)
    from placement.domain.fleet import load_fleet
    from placement.plan.schema import Plan
    from placement.plan.store import DirectoryPlanStore
    from placement.plan.validate import validate
    from placement.solver import SolveOptions, build_instance, solve_plan
    from placement.solver.lp import BACKENDS
    from sim.workloads.registry import load_workload

    if backend not in BACKENDS:
        raise InputError(
            f"unknown backend {backend!r}", field="--backend", expected=", ".join(BACKENDS)
        )
    spec = load_fleet(fleet)
    wl = load_workload(workload, seed=seed, duration_s=window_s)
    if tenants is not None:
        from placement.domain.tenancy import load_tenancy
        from sim.workloads.trace_file import with_tenancy

        gpus = float(sum(r.tp for r in spec.replicas))
        wl = with_tenancy(wl, load_tenancy(tenants, fleet_gpus=gpus), seed=seed)
    prev = _previous(previous)
    assert prev is None or isinstance(prev, Plan)
    store = DirectoryPlanStore(out)
    latest = store.latest()
    version = max((p.version for p in (prev, latest) if p is not None), default=0) + 1
    with _console.status("building the instance (capacity tables, prefix groups)…"):
        inst = build_instance(
            spec,
            wl.requests,
            wl.tenants,
            wl.classes,
            window_s=window_s,
            block_tokens=wl.block_tokens,
        )
    with _console.status(f"solving ({inst.n_units} demand units, {inst.n_replicas} replicas)…"):
        plan = solve_plan(
            inst,
            previous=prev,
            time_limit_s=time_limit,
            version=version,
            options=SolveOptions(backend=backend),
        )
    validate(plan, fleet=spec)
    store.put(plan)
    _print_plan(plan)
    _console.print(f"published {store.path(plan.version)}")


def _print_plan(plan: object) -> None:
    from placement.plan.schema import Plan

    assert isinstance(plan, Plan)
    s = plan.solver
    _console.print(
        f"plan {plan.version} of fleet {plan.fleet} ({plan.capacity_source}): {s.backend} "
        f"{s.status}, objective {s.objective:.4f}, bound {s.bound:.4f}, gap {s.gap:.2%}, "
        f"{s.solve_s:.2f} s, churn {s.churn:.1%}; {len(plan.groups)} groups, "
        f"{len(plan.defaults)} defaults"
    )
    reps = Table(
        "replica",
        "accelerator",
        "model",
        "planned req/s",
        "cap req/s",
        "warm tokens",
        title="replicas",
    )
    for r in plan.replicas:
        reps.add_row(
            r.id,
            r.accelerator,
            r.model,
            f"{r.planned_rps:.2f}",
            f"{r.load_cap_rps:.2f}",
            f"{r.warm_prefix_tokens:,}",
        )
    _console.print(folding(reps))
    ten = Table(
        "tenant",
        "credit share",
        "burst cap",
        "demand req/s",
        "admitted req/s",
        "predicted attainment",
        title="tenants",
    )
    for tp in plan.tenants:
        attainment = tp.predicted_attainment
        ten.add_row(
            tp.tenant,
            f"{tp.guaranteed_share:.1%}",
            f"{tp.cap_share:.1%}",
            f"{tp.demand_rps:.2f}",
            f"{tp.admitted_rps:.2f}",
            "no demand" if attainment is None else f"{attainment:.1%}",
        )
    if plan.tenants:
        _console.print(folding(ten))
    out = Table(
        "tenant", "class", "demand req/s", "served req/s", "shed", "attainment", title="outcomes"
    )
    for o in plan.outcomes:
        out.add_row(
            o.tenant,
            o.request_class,
            f"{o.demand_rps:.2f}",
            f"{o.served_rps:.2f}",
            f"{o.shed_share:.1%}",
            f"{o.predicted_attainment:.1%}",
        )
    _console.print(folding(out))
    if plan.timing_sources:
        timing = Table(
            "accelerator", "model", "tp", "timings from", "expected error", title="engine timings"
        )
        for t in plan.timing_sources:
            error = "unmeasured" if t.expected_error is None else f"±{t.expected_error:.2f}"
            timing.add_row(t.accelerator, t.model, str(t.tp), t.source, error)
        _console.print(folding(timing))


@app.command("show")
@user_errors
def show(path: Annotated[Path, typer.Argument(help="plan JSON file")]) -> None:
    """Summarise a plan: solver report, replicas, per-tenant outcomes."""
    from placement.plan.store import read_plan

    _print_plan(read_plan(path))


@app.command("diff")
@user_errors
def diff(
    a: Annotated[Path, typer.Argument(help="older plan JSON")],
    b: Annotated[Path, typer.Argument(help="newer plan JSON")],
) -> None:
    """What changed between two plans: moved traffic, groups, caps, attainment."""
    from placement.plan.diff import diff_plans
    from placement.plan.store import read_plan

    d = diff_plans(read_plan(a), read_plan(b))
    _console.print(
        f"plan {d.old_version} → {d.new_version}: {d.moved_share:.1%} of traffic moved; groups "
        f"+{len(d.groups_added)} −{len(d.groups_removed)}, {len(d.groups_moved)} moved"
    )
    if d.caps_changed:
        t = Table("replica", "old cap", "new cap", title="caps changed")
        for rid, old, new in d.caps_changed:
            t.add_row(rid, f"{old:.2f}", f"{new:.2f}")
        _console.print(folding(t))
    if d.attainment_changed:
        t = Table("tenant", "class", "old", "new", title="predicted attainment changed")
        for tenant, cls, old, new in d.attainment_changed:
            t.add_row(tenant, cls, f"{old:.1%}", f"{new:.1%}")
        _console.print(folding(t))


@app.command("validate")
@user_errors
def validate_cmd(
    path: Annotated[Path, typer.Argument(help="plan JSON file")],
    fleet: Annotated[Path | None, typer.Option(help="fleet YAML to check replicas against")] = None,
) -> None:
    """Check capacity, coverage and credits; exit 2 listing the problems if any."""
    from placement.domain.fleet import load_fleet
    from placement.plan.store import read_plan
    from placement.plan.validate import validate

    plan = validate(read_plan(path), fleet=load_fleet(fleet) if fleet is not None else None)
    _console.print(f"plan {plan.version}: valid")
