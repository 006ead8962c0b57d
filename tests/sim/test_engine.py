"""The closed-form engine against a token-by-token reference, plus KV and cache behaviour."""

from __future__ import annotations

import dataclasses
import random

import pytest

from placement.domain.requests import Request
from sim.costmodel.linear import LinearCostModel
from sim.engine import Replica


class Recorder:
    def __init__(self) -> None:
        self.first: dict[int, float] = {}
        self.done: dict[int, float] = {}

    def on_first_token(self, req: Request, replica: int, now: float) -> None:
        self.first[req.id] = now

    def on_complete(self, req: Request, replica: int, now: float) -> None:
        self.done[req.id] = now


def drive(replica: Replica, requests: list[Request]) -> None:
    """Feed arrivals and run-ends in time order, as the simulator does."""
    pending = sorted(requests, key=lambda r: r.arrival_s)
    end: float | None = None
    i = 0
    while i < len(pending) or end is not None:
        if end is not None and (i >= len(pending) or end <= pending[i].arrival_s):
            end = replica.step(end)
            continue
        new_end = replica.enqueue(pending[i], pending[i].arrival_s)
        if new_end is not None:
            end = new_end
        i += 1


def reference(requests: list[Request], cost: LinearCostModel, budget: int, max_seqs: int):
    """Iteration-by-iteration continuous batching with chunked prefill (no cache, ample KV)."""
    pending = sorted(requests, key=lambda r: r.arrival_s)
    waiting: list[list] = []  # [req, computed]
    prefilling: list[list] = []
    decoding: list[list] = []  # [req, context, generated]
    first: dict[int, float] = {}
    done: dict[int, float] = {}
    t = 0.0
    i = 0
    while i < len(pending) or waiting or prefilling or decoding:
        while i < len(pending) and pending[i].arrival_s <= t:
            waiting.append([pending[i], 0])
            i += 1
        if not (waiting or prefilling or decoding):
            t = pending[i].arrival_s
            continue
        while waiting and len(prefilling) + len(decoding) < max_seqs:
            prefilling.append(waiting.pop(0))
        left = budget - len(decoding)
        chunks = []
        for item in prefilling:
            if left <= 0:
                break
            c = min(item[0].input_tokens - item[1], left)
            chunks.append((item, c))
            left -= c
        ctx = sum(d[1] for d in decoding)
        t += cost.iteration_s([(c, it[1]) for it, c in chunks], len(decoding), ctx)
        still = []
        for d in decoding:
            d[1] += 1
            d[2] += 1
            if d[2] >= d[0].output_tokens:
                done[d[0].id] = t
            else:
                still.append(d)
        decoding = still
        for item, c in chunks:
            item[1] += c
            if item[1] >= item[0].input_tokens:
                prefilling.remove(item)
                first[item[0].id] = t
                if item[0].output_tokens <= 1:
                    done[item[0].id] = t
                else:
                    decoding.append([item[0], item[0].input_tokens + 1, 1])
    return first, done


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_closed_form_matches_token_by_token_reference(fleet, seed):
    cost = LinearCostModel(
        overhead_s=0.003,
        per_token_s=5e-5,
        attn_pair_s=1e-9,
        per_seq_s=1e-5,
        per_context_token_s=3e-8,
    )
    spec = dataclasses.replace(
        fleet.replicas[0],
        max_num_batched_tokens=1024,
        max_num_seqs=8,
        kv_capacity_tokens=10_000_000,
    )
    rng = random.Random(seed)
    reqs = []
    t = 0.0
    for i in range(60):
        t += rng.expovariate(4.0)
        reqs.append(Request(i, t, rng.randint(1, 3000), rng.randint(1, 200)))
    rec = Recorder()
    drive(Replica(0, spec, cost, rec), reqs)
    ref_first, ref_done = reference(reqs, cost, 1024, 8)
    assert set(rec.done) == set(ref_done) == set(range(60))
    for i in range(60):
        assert rec.first[i] == pytest.approx(ref_first[i], rel=1e-9, abs=1e-9)
        assert rec.done[i] == pytest.approx(ref_done[i], rel=1e-9, abs=1e-9)


def test_single_request_ttft_and_tpot_are_hand_computable(fleet):
    cost = LinearCostModel(overhead_s=0.01, per_token_s=1e-4, per_context_token_s=0.0)
    spec = dataclasses.replace(fleet.replicas[0], max_num_batched_tokens=2048)
    rec = Recorder()
    r = Request(0, 1.0, 5000, 11)
    drive(Replica(0, spec, cost, rec), [r])
    # prefill: chunks 2048, 2048, 904 -> 3 iterations of 0.01 + tokens·1e-4
    ttft = 3 * 0.01 + 5000 * 1e-4
    assert r.first_token_s == pytest.approx(1.0 + ttft)
    # 10 more tokens, one per decode iteration of 0.01 + 1e-4
    assert r.finish_s == pytest.approx(1.0 + ttft + 10 * (0.01 + 1e-4))


def test_second_request_with_same_prefix_hits_the_cache(fleet, cost):
    spec = fleet.replicas[0]
    rec = Recorder()
    blocks = (11, 12, 13, 14)
    a = Request(0, 0.0, 2100, 5, block_hashes=blocks, block_tokens=512)
    b = Request(1, 10.0, 2100, 5, block_hashes=blocks, block_tokens=512)
    c = Request(2, 20.0, 2100, 5, block_hashes=(11, 99, 98, 97), block_tokens=512)
    replica = Replica(0, spec, cost, rec)
    drive(replica, [a, b, c])
    assert a.cached_tokens == 0
    assert b.cached_tokens == 4 * 512  # 2100 // 512 = 4 full blocks
    assert c.cached_tokens == 512
    assert b.first_token_s - b.arrival_s < a.first_token_s - a.arrival_s
    assert replica.cache.used == replica.cache.evictable  # nothing pinned once all finished


def test_fully_cached_prompt_still_recomputes_its_last_block(fleet, cost):
    rec = Recorder()
    a = Request(0, 0.0, 1024, 3, block_hashes=(1, 2), block_tokens=512)
    b = Request(1, 5.0, 1024, 3, block_hashes=(1, 2), block_tokens=512)
    drive(Replica(0, fleet.replicas[0], cost, rec), [a, b])
    assert b.cached_tokens == 512


def test_memory_pressure_preempts_and_every_request_still_finishes(fleet, cost):
    spec = dataclasses.replace(fleet.replicas[0], kv_capacity_tokens=6000, max_num_seqs=64)
    rec = Recorder()
    replica = Replica(0, spec, cost, rec)
    reqs = [Request(i, i * 0.01, 1000, 400) for i in range(12)]
    drive(replica, reqs)
    assert replica.preemptions > 0
    assert sorted(rec.done) == list(range(12))
    assert all(r.finish_s > r.first_token_s > r.arrival_s for r in reqs)
    assert replica.cache.used == replica.cache.evictable == 0


def test_request_longer_than_the_kv_cache_fails_clearly(fleet, cost):
    spec = dataclasses.replace(fleet.replicas[0], kv_capacity_tokens=1000)
    rec = Recorder()
    r = Request(0, 0.0, 900, 200)
    drive(Replica(0, spec, cost, rec), [r])
    assert "KV cache" in r.error and rec.done == {0: 0.0}


def test_slowdown_stretches_iterations(fleet, cost):
    times = []
    for factor in (1.0, 3.0):
        rec = Recorder()
        replica = Replica(0, fleet.replicas[0], cost, rec)
        replica.slowdown = factor
        r = Request(0, 0.0, 3000, 50)
        drive(replica, [r])
        times.append(r.finish_s)
    assert times[1] == pytest.approx(3 * times[0])


def test_iteration_clock_tells_a_streaming_engine_where_the_run_is(fleet):
    cost = LinearCostModel(overhead_s=0.01, per_token_s=1e-4, per_context_token_s=0.0)
    spec = dataclasses.replace(fleet.replicas[0], max_num_batched_tokens=2048)
    replica = Replica(0, spec, cost, Recorder())
    assert replica.iteration_clock(0.0) == (0, float("inf"))  # idle
    end = replica.enqueue(Request(0, 1.0, 5000, 11), 1.0)
    assert end is not None
    # one prompt planned as three prefill iterations: 2048, 2048, 904 tokens
    first_chunk = 1.0 + 0.01 + 2048 * 1e-4
    assert replica.iteration_clock(first_chunk + 1e-6) == (
        1,
        pytest.approx(first_chunk + 0.01 + 2048 * 1e-4),
    )
    decode_end = replica.step(end)  # the first token; a decode run of 10 iterations follows
    assert decode_end == pytest.approx(end + 10 * (0.01 + 1e-4))
    step = 0.01 + 1e-4
    done, next_end = replica.iteration_clock(end + 3.5 * step)
    assert done == 3 and next_end == pytest.approx(end + 4 * step)
    assert replica.iteration_clock(end + 9.5 * step) == (9, pytest.approx(end + 10 * step))
