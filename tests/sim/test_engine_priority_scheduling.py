"""Priority scheduling in the engine (vLLM ``--scheduling-policy priority``)."""

from __future__ import annotations

import dataclasses
import random

import pytest

from placement.domain.requests import Request
from placement.errors import InputError
from sim.costmodel.linear import LinearCostModel
from sim.engine import FCFS, PRIORITY, Replica
from tests.sim.test_engine import Recorder, drive

COST = LinearCostModel(overhead_s=0.01, per_token_s=1e-4, per_context_token_s=0.0)


def _request(i: int, at: float, prompt: int, out: int, priority: int) -> Request:
    r = Request(i, at, prompt, out)
    r.priority = priority
    return r


def _one_at_a_time(fleet):
    """A replica that admits one sequence at a time: the waiting queue's order is the order
    of the first tokens."""
    return dataclasses.replace(fleet.replicas[0], max_num_seqs=1, max_num_batched_tokens=2048)


def test_waiting_requests_are_served_by_priority_then_arrival(fleet):
    spec = _one_at_a_time(fleet)
    # the first occupies the engine; four wait: batch (1) ones first, interactive (0) later
    reqs = [
        _request(0, 0.0, 2000, 50, 1),
        _request(1, 0.01, 500, 2, 1),
        _request(2, 0.02, 500, 2, 1),
        _request(3, 0.03, 500, 2, 0),
        _request(4, 0.04, 500, 2, 0),
    ]
    drive(Replica(0, spec, COST, Recorder(), scheduling=PRIORITY), reqs)
    order = [r.id for r in sorted(reqs, key=lambda r: r.first_token_s)]
    assert order == [0, 3, 4, 1, 2]


def test_fcfs_ignores_priority(fleet):
    spec = _one_at_a_time(fleet)
    reqs = [_request(i, i * 0.01, 2000 if i == 0 else 500, 2, 1 if i < 3 else 0) for i in range(5)]
    drive(Replica(0, spec, COST, Recorder(), scheduling=FCFS), reqs)
    order = [r.id for r in sorted(reqs, key=lambda r: r.first_token_s)]
    assert order == [0, 1, 2, 3, 4]


def test_equal_priorities_schedule_exactly_as_fcfs(fleet):
    """With every request at one priority the priority engine is the FCFS engine (no
    preemption here: the order of arrivals is the order of enqueues)."""
    spec = dataclasses.replace(fleet.replicas[0], max_num_seqs=4, max_num_batched_tokens=1024)
    rng = random.Random(3)
    t = 0.0
    arrivals = []
    for i in range(80):
        t += rng.expovariate(6.0)
        arrivals.append((i, t, rng.randint(1, 3000), rng.randint(1, 120)))
    outcomes = []
    for scheduling in (FCFS, PRIORITY):
        reqs = [Request(*a) for a in arrivals]
        drive(Replica(0, spec, COST, Recorder(), scheduling=scheduling), reqs)
        outcomes.append([(r.first_token_s, r.finish_s) for r in reqs])
    assert outcomes[0] == outcomes[1]


def test_memory_pressure_preempts_the_worst_priority_first(fleet):
    spec = dataclasses.replace(fleet.replicas[0], kv_capacity_tokens=6000, max_num_seqs=64)
    # the newest decoders are interactive (0): FCFS would preempt them first
    reqs = [_request(i, i * 0.01, 1000, 400, 1 if i < 3 else 0) for i in range(5)]
    replica = Replica(0, spec, COST, Recorder(), scheduling=PRIORITY)
    drive(replica, reqs)
    assert replica.preemptions > 0
    assert all(r.preemptions == 0 for r in reqs if r.priority == 0)
    assert any(r.preemptions > 0 for r in reqs if r.priority == 1)
    assert all(r.finish_s > r.first_token_s > r.arrival_s for r in reqs)
    assert replica.cache.used == replica.cache.evictable == 0


def test_fcfs_preempts_the_newest_whatever_its_priority(fleet):
    spec = dataclasses.replace(fleet.replicas[0], kv_capacity_tokens=6000, max_num_seqs=64)
    reqs = [_request(i, i * 0.01, 1000, 400, 1 if i < 3 else 0) for i in range(5)]
    drive(Replica(0, spec, COST, Recorder(), scheduling=FCFS), reqs)
    assert any(r.preemptions > 0 for r in reqs if r.priority == 0)


def test_unknown_scheduling_policy_is_refused(fleet):
    with pytest.raises(InputError, match="scheduling"):
        Replica(0, fleet.replicas[0], COST, Recorder(), scheduling="lifo")
