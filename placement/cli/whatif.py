"""``placement whatif SCENARIO.yaml --out DIR``: thin — load, run, report."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import Progress

from placement.cli.errors import user_errors
from placement.cli.profiles import ProfilesOption, use_profiles
from placement.errors import InputError

app = typer.Typer()


@app.command("whatif")
@user_errors
def whatif(
    scenario: Annotated[Path, typer.Argument(help="scenario YAML (see data/scenarios/)")],
    out: Annotated[Path, typer.Option(help="folder for the table, plans and plots")],
    scheduler: Annotated[
        str | None, typer.Option(help="Dask scheduler address (default: a LocalCluster)")
    ] = None,
    local_sync: Annotated[
        bool, typer.Option("--local-sync", help="run the cases in this process, without Dask")
    ] = False,
    simulate: Annotated[
        bool | None,
        typer.Option(
            "--simulate/--no-simulate",
            help="also run each plan in the simulator (default: the scenario's base.simulate)",
        ),
    ] = None,
    attainment: Annotated[
        str | None,
        typer.Option(
            help="model of the plans' predicted attainment: replica (each replica its own "
            "queue) or pooled (each pool of replicas one queue); default: the scenario's "
            "base.attainment, else the route profile's (scored: pooled; weighted: replica)"
        ),
    ] = None,
    route_profile: Annotated[
        Path | None,
        typer.Option(
            help="route profile YAML the simulated column runs the plans on (default: "
            "data/profiles/default.yaml)"
        ),
    ] = None,
    profiles: ProfilesOption = None,
) -> None:
    """Solve every case of a what-if scenario; print and write the table, plans and plots."""
    use_profiles(profiles)
    from bench.policies import policy_for_plan
    from placement.report import console
    from placement.whatif.load import load_scenario
    from placement.whatif.report import print_results, write_results
    from placement.whatif.run import run_scenario, task_count

    out_console = console()
    with out_console.status("reading the scenario (fleet, workload, names)…"):
        spec = load_scenario(scenario)
    if attainment is not None:
        if attainment not in ("replica", "pooled"):
            raise InputError(f"--attainment: {attainment!r} is not one of: replica, pooled")
        spec = spec.model_copy(update={"attainment": attainment})
    policy = policy_for_plan
    if route_profile is not None:
        from placement.solver.pooled_attainment import attainment_for
        from serving.route import load_profile

        picker = load_profile(route_profile).plan_picker
        policy = partial(policy_for_plan, route_profile=route_profile)
        if spec.attainment is None:
            spec = spec.model_copy(update={"attainment": attainment_for(picker)})
    sim = spec.simulate if simulate is None else simulate
    with Progress(console=out_console, transient=True) as progress:
        task = progress.add_task(f"{spec.name}: solving", total=task_count(spec))

        def done(name: str) -> None:
            progress.update(task, advance=1, description=f"{spec.name}: {name} done")

        result = run_scenario(
            spec,
            scheduler=scheduler,
            sync=local_sync,
            simulate=policy if sim else None,
            progress=done,
        )
    print_results(spec, result.cases, out_console, result.min_cost)
    written = write_results(spec, result.cases, out, result.min_cost)
    out_console.print(f"wrote {len(written)} files to {out}")
