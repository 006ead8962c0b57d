"""The benchmarks' registry: every peer and the service's own route path, by name."""

import pytest

from bench.policies import OURS, POLICIES, GateSettings, PlacementSettings, make_policy
from placement.errors import InputError
from sim.peers import PEER_POLICIES, PolicyContext
from sim.router import RoutingPolicy


def test_registry_is_the_peers_and_ours():
    assert set(POLICIES) == set(PEER_POLICIES) | {OURS}
    assert OURS == "placement"


def test_unknown_name_lists_ours_too():
    with pytest.raises(InputError) as err:
        make_policy("least_loaded", PolicyContext(seed=0))
    assert OURS in str(err.value)


def test_ours_is_a_routing_policy_named_placement():
    policy = make_policy(OURS, PolicyContext(seed=0))
    assert isinstance(policy, RoutingPolicy)
    assert policy.name == OURS


def test_settings_of_the_wrong_type_name_the_field():
    with pytest.raises(InputError, match=r"settings\.placement"):
        make_policy(OURS, PolicyContext(seed=0, settings={OURS: {"plan": None}}))


def test_plan_policy_has_no_gate_and_no_plan_when_given_none():
    policy = make_policy(OURS, PolicyContext(seed=0, settings={OURS: PlacementSettings()}))
    assert policy.gate is None


def test_ours_routes_10k_random_requests_only_to_healthy_matching_replicas(route_random):
    route_random(make_policy(OURS, PolicyContext(seed=1, block_tokens=512)))


def test_ours_reads_each_replicas_tp_and_judges_a_70b_on_4_gpus_by_its_own_tables():
    from placement.domain.fleet import load_fleet
    from placement.domain.requests import Request
    from placement.paths import repo_root
    from sim.gateway import Gateway

    fleet = load_fleet(repo_root() / "data" / "fleets" / "multimodel.yaml")
    policy = make_policy(
        OURS, PolicyContext(seed=0, settings={OURS: PlacementSettings(slo_gate=GateSettings())})
    )
    gateway = Gateway(fleet.replicas, policy)
    assert [v.tp for v in gateway.views] == [r.tp for r in fleet.replicas]
    assert {v.tp for v in gateway.views if v.model == "llama-3-70b"} == {4}
    # a chat turn on a 70B replica behind a modest queue: its full-chunk step on 4×H100
    # (~175 ms) is within reach, on one H100 (~440 ms, the old TP-1 table) a certain miss
    big = next(v for v in gateway.views if v.model == "llama-3-70b")
    big.outstanding_prefill_tokens = big.outstanding = 0
    req = Request(1, 0.0, 1000, 400, model="llama-3-70b")
    idx = policy.route(req, gateway.views, 0.0)
    assert idx >= 0
    assert policy.path.replica(gateway.views[idx].id).tp == 4
    assert policy.gate is not None and policy.gate.last.forecast is not None
    assert policy.gate.last.forecast.full_step_s < 0.25


def _refusing_policy(audit_share: float):
    from placement.domain.requests import RequestClass

    tight = RequestClass(name="tight", priority=0, ttft_slo_s=1e-6, tpot_slo_s=1e-6, sheddable=True)
    settings = PlacementSettings(
        slo_gate=GateSettings(audit_share=audit_share), classes={"tight": tight}
    )
    return make_policy(OURS, PolicyContext(seed=0, settings={OURS: settings}))


@pytest.mark.parametrize("share", [0.0, 0.3, 1.0])
def test_an_audit_admits_its_share_of_refusals_by_request_id_and_records_them(share):
    from placement.domain.fleet import load_fleet
    from placement.domain.requests import Request
    from placement.paths import repo_root
    from sim.gateway import Gateway

    fleet = load_fleet(repo_root() / "data" / "fleets" / "h100x8.yaml")
    policy = _refusing_policy(share)
    gateway = Gateway(fleet.replicas, policy)
    routed = [
        policy.route(Request(i, 0.0, 1000, 50, request_class="tight"), gateway.views, 0.0)
        for i in range(400)
    ]
    admitted = {i for i, idx in enumerate(routed) if idx >= 0}
    # a microsecond SLO: the gate refuses every request; the audit admits some anyway
    assert admitted == set(policy.would_refuse) == {i for i in range(400) if policy.audited(i)}
    assert policy.shed == 400 - len(admitted)
    assert abs(len(admitted) / 400 - share) < 0.07
    again = _refusing_policy(share)
    assert {i for i in range(400) if again.audited(i)} == admitted  # the same ids every run


@pytest.mark.parametrize(("mode", "priorities"), [(None, [0, 0]), ("class", [0, 1])])
def test_ours_sends_each_request_with_its_engine_priority(mode, priorities):
    from placement.domain.fleet import load_fleet
    from placement.domain.requests import Request
    from placement.paths import repo_root
    from sim.gateway import Gateway

    fleet = load_fleet(repo_root() / "data" / "fleets" / "h100x8.yaml")
    settings = PlacementSettings(slo_gate=GateSettings(), engine_priority=mode)
    policy = make_policy(OURS, PolicyContext(seed=0, settings={OURS: settings}))
    gateway = Gateway(fleet.replicas, policy)
    reqs = [
        Request(i, 0.0, 1000, 50, request_class=c) for i, c in enumerate(("interactive", "batch"))
    ]
    for r in reqs:
        assert policy.route(r, gateway.views, 0.0) >= 0
    assert [r.priority for r in reqs] == priorities
    assert policy.path.by_priority == (mode is not None)
    kept = [s.prefill_tokens_by_priority for s in policy.path.replicas]
    assert any(kept) == (mode is not None)


def test_ours_by_credit_sends_an_owed_tenant_first_and_without_credits_or_gate_by_class():
    from placement.domain.fleet import load_fleet
    from placement.domain.requests import Request
    from placement.paths import repo_root
    from sim.gateway import Gateway

    fleet = load_fleet(repo_root() / "data" / "fleets" / "h100x8.yaml")
    both = {"a": 0.5, "b": 0.5}
    for credits, gate, expected in (
        (both, True, [0, 1]),
        ({}, True, [0, 0]),
        (both, False, [0, 0]),
    ):
        settings = PlacementSettings(
            slo_gate=GateSettings() if gate else None, engine_priority="credit", credits=credits
        )
        policy = make_policy(OURS, PolicyContext(seed=0, settings={OURS: settings}))
        gateway = Gateway(fleet.replicas, policy)
        # both active, then tenant a is sent a long prompt: b is owed, a is not
        sent = [Request(i, 0.0, n, 50, tenant=t) for i, t, n in ((0, "a", 1000), (1, "b", 1000))]
        sent.append(Request(2, 0.0, 8000, 50, tenant="a"))
        assert all(policy.route(r, gateway.views, 0.0) >= 0 for r in sent)
        reqs = [Request(i, 0.1, 1000, 50, tenant=t) for i, t in ((3, "b"), (4, "a"))]
        for r in reqs:
            policy.route(r, gateway.views, 0.1)
        assert [r.priority for r in reqs] == expected


def test_the_shadow_admits_a_refused_request_where_the_gate_judged_it():
    """A refusal judged on the second look's replica is admitted there by the shadow (where it
    would have gone had it been admitted), not on the route path's first choice."""
    import dataclasses

    from placement.domain.fleet import load_fleet
    from placement.domain.requests import Request
    from placement.paths import repo_root
    from sim.gateway import Gateway

    fleet = load_fleet(repo_root() / "data" / "fleets" / "h100x8.yaml")
    settings = PlacementSettings(slo_gate=GateSettings(shadow=True))
    policy = make_policy(OURS, PolicyContext(seed=0, settings={OURS: settings}))
    gateway = Gateway(fleet.replicas, policy)
    gate = policy.gate
    assert gate is not None
    elsewhere = gateway.views[-1].id

    def refuse_elsewhere(path, query, decision, now, **_):
        assert decision.replica_id != elsewhere  # the route path's choice: an idle fleet's first
        gate.last_decision = dataclasses.replace(decision, replica_id=elsewhere)
        return None

    gate.admit_decision = refuse_elsewhere
    idx = policy.route(Request(7, 0.0, 1000, 50), gateway.views, 0.0)
    assert gateway.views[idx].id == elsewhere and policy.would_refuse == {7}
