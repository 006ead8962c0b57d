from __future__ import annotations

import itertools

import pytest

from placement.errors import InputError
from sim.faults import Fault, faults_from_list
from sim.simulator import SimConfig, Simulator
from sim.workloads.base import Workload


@pytest.fixture
def workload(make_requests):
    def make(n: int = 3000, rate: float = 30.0, seed: int = 0) -> Workload:
        return Workload(name="random", requests=make_requests(n, rate, seed), tenants={})

    return make


def outcome(result):
    return [(r.replica, r.first_token_s, r.finish_s, r.cached_tokens) for r in result.requests]


def test_same_inputs_same_result(fleet, cost, policy, workload):
    a = Simulator(fleet, policy, workload(), cost_model=lambda s: cost).run()
    b = Simulator(fleet, policy, workload(), cost_model=lambda s: cost).run()
    assert outcome(a) == outcome(b)
    assert a.events == b.events


def test_every_request_finishes_and_router_counters_return_to_zero(fleet, cost, policy, workload):
    sim = Simulator(fleet, policy, workload(), cost_model=lambda s: cost)
    result = sim.run()
    assert all(r.finish_s >= r.first_token_s > r.arrival_s for r in result.requests)
    assert all(v.outstanding == 0 and v.decoding == 0 for v in sim.gateway.views)
    assert all(v.outstanding_prefill_tokens == 0 for v in sim.gateway.views)


def test_killed_replica_loses_no_request_and_stops_receiving_routes(fleet, cost, policy, workload):
    faults = (Fault(at_s=20.0, replica="h100-1", kind="kill"),)
    sim = Simulator(
        fleet, policy, workload(), cost_model=lambda s: cost, config=SimConfig(faults=faults)
    )
    result = sim.run()
    assert all(r.finish_s > 0 and not r.error for r in result.requests)
    assert result.retries > 0
    late = [r for r in result.requests if r.arrival_s > 21.0]
    assert late and all(r.replica != 1 for r in late)
    assert all(t < 21.0 for t in result.routes_to_dead)


def test_straggler_raises_latency_on_its_replica_only(fleet, cost, policy, workload):
    slow = Simulator(
        fleet,
        policy,
        workload(),
        cost_model=lambda s: cost,
        config=SimConfig(faults=(Fault(at_s=0.0, replica="h100-2", kind="slow", factor=3.0),)),
    ).run()

    def mean_tpot(rs):
        return sum((r.finish_s - r.first_token_s) / (r.output_tokens - 1) for r in rs) / len(rs)

    on_slow = [r for r in slow.requests if r.replica == 2]
    others = [r for r in slow.requests if r.replica != 2]
    assert mean_tpot(on_slow) > 2.0 * mean_tpot(others)


def test_drain_horizon_leaves_late_requests_unfinished(fleet, cost, policy, workload):
    wl = workload(n=3000, rate=400.0)  # far beyond 4 replicas
    result = Simulator(
        fleet, policy, wl, cost_model=lambda s: cost, config=SimConfig(drain_s=0.0)
    ).run()
    assert any(r.finish_s < 0 for r in result.requests)


def test_unknown_fault_replica_is_refused(fleet, cost, policy, workload):
    with pytest.raises(InputError, match="h100-99"):
        Simulator(
            fleet,
            policy,
            workload(10),
            cost_model=lambda s: cost,
            config=SimConfig(faults=(Fault(at_s=1, replica="h100-99", kind="kill"),)),
        )


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ([{"at_s": 1, "replica": "a", "kind": "explode"}], "faults.0.kind"),
        ([{"at_s": -1, "replica": "a", "kind": "kill"}], "faults.0"),
        ([{"at_s": 1, "replica": "a", "kind": "slow", "factr": 2}], "faults.0"),
        (["kill"], "faults.0"),
    ],
)
def test_bad_fault_lists_name_the_field(raw, field):
    with pytest.raises(InputError) as err:
        faults_from_list(raw, source="f.yaml")
    assert err.value.field == field


def test_samples_record_replica_counters_at_the_interval(fleet, cost, policy, workload):
    sim = Simulator(
        fleet,
        policy,
        workload(),
        cost_model=lambda s: cost,
        config=SimConfig(sample_interval_s=1.0),
    )
    result = sim.run()
    assert result.samples
    per_replica = [s for s in result.samples if s.replica == 0]
    times = [s.time_s for s in per_replica]
    assert all(1.0 <= b - a < 1.1 for a, b in itertools.pairwise(times))
    tokens = [s.generation_tokens for s in per_replica]
    assert tokens == sorted(tokens) and tokens[-1] > 0
    assert all(0.0 <= s.kv_usage <= 1.0 for s in result.samples)
    served = sum(r.output_tokens for r in result.requests)
    assert sum(r.generated_tokens for r in sim.replicas) == served


def test_no_samples_unless_asked(fleet, cost, policy, workload):
    assert Simulator(fleet, policy, workload(), cost_model=lambda s: cost).run().samples == []


def test_engines_schedule_by_priority_when_configured(fleet, cost, policy, workload):
    import dataclasses

    from placement.domain.fleet import Fleet

    one = Fleet(name="one", replicas=(dataclasses.replace(fleet.replicas[0], max_num_seqs=2),))
    waits = {}
    for scheduling in ("fcfs", "priority"):
        wl = workload(n=400, rate=200.0)
        for r in wl.requests:
            r.priority = r.id % 2  # a policy that sets none: the odd ones go last
        Simulator(
            one, policy, wl, cost_model=lambda s: cost, config=SimConfig(scheduling=scheduling)
        ).run()
        waits[scheduling] = [
            sum(r.first_token_s - r.arrival_s for r in wl.requests if r.priority == p)
            for p in (0, 1)
        ]
    assert waits["fcfs"][0] == pytest.approx(waits["fcfs"][1], rel=0.3)
    assert waits["priority"][0] < 0.5 * waits["priority"][1]


def test_unknown_scheduling_is_refused(fleet, cost, policy, workload):
    with pytest.raises(InputError, match="scheduling"):
        Simulator(
            fleet,
            policy,
            workload(),
            cost_model=lambda s: cost,
            config=SimConfig(scheduling="lifo"),
        )
