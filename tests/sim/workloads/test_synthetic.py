"""The synthetic multi-tenant generator: rates, credits, sessions, shared prefixes, determinism."""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict

import numpy as np
import pytest

from placement.domain.prefix import shared_prefix_blocks
from placement.domain.requests import Request
from placement.errors import InputError
from sim.workloads.synthetic import synthetic_tenants


def test_shape_rate_and_determinism() -> None:
    workload = synthetic_tenants(duration_s=1200, rate_rps=40, seed=7)
    again = synthetic_tenants(duration_s=1200, rate_rps=40, seed=7)
    other = synthetic_tenants(duration_s=1200, rate_rps=40, seed=8)
    arrivals = [r.arrival_s for r in workload.requests]
    assert arrivals[0] == 0.0
    assert arrivals == sorted(arrivals)
    assert arrivals[-1] < 1200
    assert [r.id for r in workload.requests] == list(range(len(workload)))
    # Poisson sessions of ~4 turns: sd of the count is ~2% here; 8% is a wide margin.
    assert len(workload) / 1200 == pytest.approx(40, rel=0.08)
    signature = [(r.arrival_s, r.input_tokens, r.block_hashes, r.tenant) for r in workload.requests]
    assert signature == [
        (r.arrival_s, r.input_tokens, r.block_hashes, r.tenant) for r in again.requests
    ]
    assert [r.input_tokens for r in other.requests][:50] != [
        r.input_tokens for r in workload.requests
    ][:50]
    assert all(r.model == "" and r.block_tokens == 512 for r in workload.requests)


def test_rate_is_flat_from_time_zero() -> None:
    """Sessions start before 0 (warm-up), so the first minute is as busy as the rest."""
    workload = synthetic_tenants(duration_s=1200, rate_rps=40, seed=3)
    arrivals = np.array([r.arrival_s for r in workload.requests])
    first, rest = np.sum(arrivals < 120), np.sum(arrivals >= 120)
    assert first / 120 == pytest.approx(rest / 1080, rel=0.2)


def test_skewed_traffic_and_damped_credits() -> None:
    workload = synthetic_tenants(duration_s=1200, rate_rps=40, seed=1, tenants=6, skew=1.2)
    counts = Counter(r.tenant for r in workload.requests)
    shares = {t: counts[t] / len(workload) for t in workload.tenants}
    credits = {t: v.credit_share for t, v in workload.tenants.items()}
    assert sum(credits.values()) == pytest.approx(1.0)
    assert list(credits) == [f"tenant-{i}" for i in range(6)]
    assert credits["tenant-0"] > credits["tenant-5"]
    assert shares["tenant-0"] > credits["tenant-0"]  # the busiest tenant exceeds its share
    assert shares["tenant-5"] < credits["tenant-5"]
    weights = np.arange(1, 7, dtype=float) ** -1.2
    assert shares["tenant-0"] == pytest.approx(weights[0] / weights.sum(), rel=0.15)


def test_tenants_are_interactive_or_batch() -> None:
    workload = synthetic_tenants(duration_s=600, rate_rps=20, seed=2, tenants=8, batch_tenants=0.5)
    classes: dict[str, set[str]] = defaultdict(set)
    for r in workload.requests:
        classes[r.tenant].add(r.request_class)
    assert all(len(c) == 1 for c in classes.values())
    assert Counter(next(iter(c)) for c in classes.values()) == {"interactive": 4, "batch": 4}
    only_interactive = synthetic_tenants(duration_s=300, rate_rps=10, seed=2, batch_tenants=0.0)
    assert {r.request_class for r in only_interactive.requests} == {"interactive"}


def test_later_turns_extend_the_earlier_turns_hashes() -> None:
    """One tenant, one 2-block system prompt, no hot keys, 64-token blocks: block 2 onwards is
    session content, so requests sharing 3+ hashes belong to the same session."""
    workload = synthetic_tenants(
        duration_s=600,
        rate_rps=5,
        seed=4,
        tenants=1,
        system_prompt_tokens=(128, 128),
        prompts_per_tenant=(1, 1),
        hot_keys=0,
        hot_share=0.0,
        batch_tenants=0.0,
        block_tokens=64,
    )
    prompt = {r.block_hashes[:2] for r in workload.requests}
    assert len(prompt) == 1  # every request starts with the tenant's system prompt
    sessions: dict[int, list[Request]] = defaultdict(list)
    for r in workload.requests:
        assert len(r.block_hashes) == r.input_tokens // 64
        if len(r.block_hashes) > 2:
            sessions[r.block_hashes[2]].append(r)
    multi_turn = [s for s in sessions.values() if len(s) >= 3]
    assert len(multi_turn) > 10
    for turns in sessions.values():
        for earlier, later in itertools.pairwise(turns):
            assert later.arrival_s >= earlier.arrival_s
            assert later.block_hashes[: len(earlier.block_hashes)] == earlier.block_hashes
            # turn k = turn k-1's prompt + its output + at least one new token
            assert later.input_tokens > earlier.input_tokens + earlier.output_tokens
    heads = list(sessions)
    for a, b in itertools.pairwise(heads):
        first_a, first_b = sessions[a][0], sessions[b][0]
        shared = shared_prefix_blocks(first_a.block_hashes, first_b.block_hashes)
        assert shared == 2  # different sessions share only the system prompt


def test_hot_keys_are_shared_across_tenants() -> None:
    hot = synthetic_tenants(
        duration_s=300,
        rate_rps=20,
        seed=5,
        system_prompt_tokens=(1024, 2048),
        hot_keys=3,
        hot_share=1.0,
    )
    first_blocks = Counter(r.block_hashes[0] for r in hot.requests)
    assert len(first_blocks) <= 3
    tenants_per_key = {
        key: {r.tenant for r in hot.requests if r.block_hashes[0] == key} for key in first_blocks
    }
    assert all(len(t) > 1 for t in tenants_per_key.values())

    cold = synthetic_tenants(
        duration_s=300, rate_rps=20, seed=5, system_prompt_tokens=(1024, 2048), hot_share=0.0
    )
    owners: dict[int, set[str]] = defaultdict(set)
    for r in cold.requests:
        owners[r.block_hashes[0]].add(r.tenant)
    assert all(len(t) == 1 for t in owners.values())


def test_hot_share_is_a_share_of_requests() -> None:
    workload = synthetic_tenants(
        duration_s=1200,
        rate_rps=30,
        seed=6,
        tenants=4,
        prompts_per_tenant=(1, 1),
        system_prompt_tokens=(1024, 2048),
        hot_keys=2,
        hot_share=0.3,
    )
    owners: dict[int, set[str]] = defaultdict(set)
    for r in workload.requests:
        owners[r.block_hashes[0]].add(r.tenant)
    hot_keys = {k for k, t in owners.items() if len(t) > 1}
    assert len(hot_keys) == 2
    hot = sum(r.block_hashes[0] in hot_keys for r in workload.requests) / len(workload)
    assert hot == pytest.approx(0.3, abs=0.06)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("rate_rps", 0.0),
        ("tenants", 0),
        ("hot_share", 1.5),
        ("session_turns_mean", 0.5),
        ("system_prompt_tokens", (10, 5)),
        ("seed", -1),
    ],
)
def test_invalid_parameters_name_the_field(field: str, value: object) -> None:
    params: dict[str, object] = {"duration_s": 10.0, "rate_rps": 1.0, "seed": 0, field: value}
    with pytest.raises(InputError) as caught:
        synthetic_tenants(**params)  # type: ignore[arg-type]
    assert caught.value.field == field
