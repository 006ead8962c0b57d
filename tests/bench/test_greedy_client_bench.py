"""``placement bench greedy-client``: a client that never reports outcomes, simulated through
the service's admission and leases, before and after issue 19's fix."""

from __future__ import annotations

import dataclasses
import json

import pytest

from bench.greedy_client import (
    GREEDY,
    MODES,
    NEWCOMER,
    STEADY,
    GreedyBench,
    run_greedy_client_bench,
)
from placement.paths import shared_data

pytestmark = pytest.mark.skipif(
    not (shared_data() / "traces/azure_llm_2023").exists(), reason="shared data missing"
)

# 45 s of the Azure conversations at load 0.4, the burst at 10 s, the newcomer from 20 s; the
# steady tenant's credit (0.75) covers its in-flight peaks in this window
SHORT = dataclasses.replace(
    GreedyBench.default(), duration_s=45.0, burst_at_s=10.0, newcomer_at_s=20.0, steady_share=0.75
)


@pytest.fixture(scope="module")
def payload(tmp_path_factory):
    out = tmp_path_factory.mktemp("greedy") / "greedy.json"
    payload = run_greedy_client_bench(SHORT, out=out)
    assert json.loads(out.read_text())["runs"] == payload["runs"]
    return payload


def rows(payload, mode):
    return {r["tenant"]: r for r in payload["runs"] if r["mode"] == mode}


def test_every_mode_is_run(payload):
    assert {r["mode"] for r in payload["runs"]} == set(MODES)


def test_before_the_fix_the_greedy_client_locks_the_others_out(payload):
    before = rows(payload, "fixed-lease")
    assert before[STEADY]["after_burst_admitted"] < 0.5
    assert before[NEWCOMER]["admitted"] < 0.5


def test_after_the_fix_the_credited_and_the_new_tenant_are_served(payload):
    after = rows(payload, "entitled")
    assert after[STEADY]["after_burst_admitted"] == 1.0
    assert after[STEADY]["after_burst_attainment"] > 0.95
    assert after[NEWCOMER]["admitted"] == 1.0
    assert 0.0 < after[GREEDY]["admitted"] < 1.0  # it borrows only what nobody else claims
