"""The loop's re-plan never breaks the loop: a failed solve keeps the previous plan, says
why in a log line and records the status."""

from __future__ import annotations

import logging
import math

import numpy as np
import pytest

import placement.solver.solve as solve_module
from bench.loop.plans import Planning
from placement.domain.fleet import fleet_from_dict
from placement.domain.prefix import chain_block_ids
from placement.domain.requests import DEFAULT_CLASSES, Request, Tenant
from placement.solver import FixedCapacity
from placement.solver.lp import LinearProgram, LpResult

FLEET = fleet_from_dict(
    {
        "name": "t",
        "replicas": [
            {"kind": "h100", "accelerator": "H100-SXM", "count": 2, "model": "llama-3-8b"}
        ],
    }
)


def _requests() -> list[Request]:
    return [
        Request(
            i,
            i / 2.0,
            1000,
            100,
            tenant="a",
            request_class="interactive",
            model="llama-3-8b",
            block_hashes=chain_block_ids([10 + i]),
        )
        for i in range(20)
    ]


def _planning() -> Planning:
    return Planning(
        fleet=FLEET,
        tenants={"a": Tenant(name="a", credit_share=0.5)},
        classes=DEFAULT_CLASSES,
        capacity=FixedCapacity({"H100-SXM": 10.0}),
        block_tokens=512,
        time_limit_s=2.0,
    )


def test_a_solver_failure_keeps_the_plan_and_is_logged(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    planning = _planning()
    first = planning.solve(_requests(), window_s=10.0)
    assert first is not None

    def invalid(lp: LinearProgram, *, backend: str, time_limit_s: float) -> LpResult:
        return LpResult("model_invalid", np.zeros(0), math.nan, math.inf, 0.0, "forced")

    monkeypatch.setattr(solve_module, "solve", invalid)
    with caplog.at_level(logging.WARNING, logger="bench.loop.plans"):
        again = planning.solve(_requests(), window_s=10.0, at_s=120.0, previous=first)
    assert again is None
    assert planning.records[-1].status == "failed"
    assert "kept the previous plan" in caplog.text and "failed" in caplog.text


def test_the_warm_prefix_budget_reaches_the_plan() -> None:
    kv = FLEET.replicas[0].kv_capacity_tokens
    for share in (0.5, 0.8):
        planning = _planning()
        planning.warm_kv_share = share
        plan = planning.solve(_requests(), window_s=10.0)
        assert plan is not None
        assert {r.kv_budget_tokens for r in plan.replicas} == {int(share * kv)}
