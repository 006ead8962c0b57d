"""The service's planner solves with the attainment model of its own route path: the worker's
plan reports what :func:`solve_plan` reports for that model, and a service on the scored
profile (which pools a model's replicas by live load) plans with the pooled model."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

from placement.domain.fleet import fleet_from_dict
from placement.paths import repo_root
from placement.solver import FixedCapacity, SolveOptions, build_instance, solve_plan
from placement.solver.pooled_attainment import AttainmentModel
from serving.api.runtime import ServiceRuntime
from serving.api.settings import Settings
from serving.demand import DemandRow, decode_demand, encode_demand
from serving.planning import SolveInputs, solve_in_worker
from serving.route.types import RouteQuery
from serving.wiring import build_app

FLEET_YAML = """
name: t
replicas:
  - {kind: h100, accelerator: H100-SXM, count: 3, model: llama-3-8b}
"""
FLEET = fleet_from_dict(yaml.safe_load(FLEET_YAML))
CAPACITY = FixedCapacity({"H100-SXM": 10.0})
# a burst: 320 long prompts in 20 s, most in the first seconds
ROWS: list[DemandRow] = [
    ("a", "llama-3-8b", "interactive", (), 3000, 100, 20.0 * (i / 320) ** 2) for i in range(320)
]


def _attainment(model: AttainmentModel) -> list[float | None]:
    inputs = SolveInputs(FLEET, encode_demand(ROWS), (), CAPACITY, attainment=model)
    plan = solve_in_worker(inputs, previous=None, time_limit_s=10.0, version=1)
    return [o.predicted_attainment for o in plan.outcomes]


def test_the_worker_reports_the_attainment_model_it_is_given() -> None:
    demand = decode_demand(encode_demand(ROWS))
    inst = build_instance(FLEET, demand, {}, capacity=CAPACITY, shed_unreachable=True)
    for model in ("replica", "pooled"):
        expected = solve_plan(inst, version=1, options=SolveOptions(attainment=model))
        assert _attainment(model) == [o.predicted_attainment for o in expected.outcomes]
    assert _attainment("pooled") != _attainment("replica")


def test_the_service_plans_with_its_route_profiles_model(tmp_path: Path) -> None:
    fleet_file = tmp_path / "fleet.yaml"
    fleet_file.write_text(FLEET_YAML)
    profiles = repo_root() / "data" / "profiles"
    for profile, model in (("scored.yaml", "pooled"), ("default.yaml", "replica")):
        settings = Settings(
            environment="development",
            fleet=fleet_file,
            profile=profiles / profile,
            plan_dir=tmp_path / profile,
            solve_time_limit_s=10,
        )
        app = build_app(settings, solve_executor=ThreadPoolExecutor(1), capacity=CAPACITY)
        runtime: ServiceRuntime = app.state.runtime
        assert runtime.planner is not None and runtime.service.demand is not None
        for tenant, name, cls, blocks, prompt, out, at in ROWS:
            query = RouteQuery(
                tenant=tenant,
                model=name,
                request_class=cls,
                block_hashes=blocks,
                input_tokens=prompt,
                max_output_tokens=out,
            )
            runtime.service.demand.record(query, at)
        result = asyncio.run(runtime.planner.solve_once("test"))
        assert result.outcome == "installed", result.detail
        assert runtime.planner.current is not None
        got = [o.predicted_attainment for o in runtime.planner.current.outcomes]
        assert got == _attainment(model), profile
