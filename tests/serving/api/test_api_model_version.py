"""``/metrics`` says which version of the latency predictor the installed plan's capacities came
from: ``placement_model_version{alias="champion"}``."""

from __future__ import annotations

from api_fakes import make_plan, make_runtime
from fastapi.testclient import TestClient

from placement.plan import Plan
from serving.api.main import create_app

GAUGE = 'placement_model_version{alias="champion"}'


def _gauge(client: TestClient) -> float:
    lines = [ln for ln in client.get("/metrics").text.splitlines() if ln.startswith(GAUGE)]
    assert len(lines) == 1
    return float(lines[0].split()[-1])


def test_a_plan_solved_with_the_champion_shows_its_version(champion_plan: Plan) -> None:
    runtime = make_runtime(plan=champion_plan)
    assert _gauge(TestClient(create_app(runtime))) == 1.0


def test_no_plan_or_the_roofline_prior_shows_zero() -> None:
    assert _gauge(TestClient(create_app(make_runtime()))) == 0.0
    runtime = make_runtime(plan=make_plan(1))
    client = TestClient(create_app(runtime))
    assert _gauge(client) == 0.0
    champion = make_plan(2).model_copy(
        update={"capacity_source": "models:/placement-latency/7 (@champion)"}
    )
    runtime.service.install_plan(champion)
    assert _gauge(client) == 7.0
    runtime.service.install_plan(make_plan(3))  # the next plan fell back to the prior
    assert _gauge(client) == 0.0


def test_a_plan_from_before_versions_were_recorded_shows_minus_one() -> None:
    older = make_plan(1).model_copy(
        update={"capacity_source": "models:/placement-latency@champion"}
    )
    assert _gauge(TestClient(create_app(make_runtime(plan=older)))) == -1.0
