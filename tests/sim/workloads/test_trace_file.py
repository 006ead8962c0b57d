"""Any trace file in the shipped formats, with any tenant mix."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from placement.domain.tenancy import tenancy_from_dict
from placement.errors import InputError
from placement.paths import repo_root
from sim.workloads.trace_file import load_trace_file, with_tenancy

SAMPLES = repo_root() / "data" / "samples"


def test_the_mooncake_sample_loads_with_prefixes() -> None:
    w = load_trace_file(SAMPLES / "mooncake" / "conversation_trace_first300.jsonl")
    assert len(w.requests) == 300
    assert w.requests[0].block_hashes
    assert {r.tenant for r in w.requests} == {"trace"}


def test_the_azure_sample_loads_without_prefixes() -> None:
    w = load_trace_file(SAMPLES / "azure" / "AzureLLMInferenceTrace_code_first300.csv")
    assert len(w.requests) == 300
    assert all(not r.block_hashes for r in w.requests)
    arrivals = [r.arrival_s for r in w.requests]
    assert arrivals == sorted(arrivals) and arrivals[0] == 0.0


def test_labels_in_the_trace_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    lines = [
        {"timestamp": 0, "input_length": 10, "output_length": 5, "tenant": "a", "model": "m1"},
        {
            "timestamp": 500,
            "input_length": 20,
            "output_length": 5,
            "tenant": "b",
            "request_class": "batch",
        },
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines))
    w = load_trace_file(path)
    assert [(r.tenant, r.request_class, r.model) for r in w.requests] == [
        ("a", "interactive", "m1"),
        ("b", "batch", ""),
    ]
    assert w.requests[1].arrival_s == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("t.jsonl", '{"timestamp": 0, "input_length": 10}', "output_length"),
        ("t.jsonl", "not json", "not JSON"),
        ("t.jsonl", '{"timestamp": 0, "input_length": 1.5, "output_length": 1}', "input_length"),
        ("t.csv", "TIMESTAMP,ContextTokens\n0,5\n", "GeneratedTokens"),
        ("t.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,5,5\n", "TIMESTAMP"),
        ("t.txt", "", "unknown trace format"),
        ("t.jsonl", "", "no requests"),
    ],
)
def test_bad_traces_name_file_line_and_field(
    tmp_path: Path, name: str, text: str, message: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(InputError, match=message) as err:
        load_trace_file(path)
    assert str(path) in str(err.value)


def test_traffic_shares_split_sessions_the_same_way_for_the_same_seed() -> None:
    tenancy = tenancy_from_dict(
        {
            "tenants": {
                "big": {"credit_share": 0.6, "traffic_share": 0.75},
                "small": {"credit_share": 0.2, "traffic_share": 0.25},
            }
        }
    )
    path = SAMPLES / "mooncake" / "conversation_trace_first300.jsonl"
    a = with_tenancy(load_trace_file(path), tenancy, seed=1)
    b = with_tenancy(load_trace_file(path), tenancy, seed=1)
    c = with_tenancy(load_trace_file(path), tenancy, seed=2)
    tenants_a = [r.tenant for r in a.requests]
    assert tenants_a == [r.tenant for r in b.requests]
    assert tenants_a != [r.tenant for r in c.requests]
    counts = Counter(tenants_a)
    assert 0.55 < counts["big"] / len(tenants_a) < 0.95
    # a session (its first two prefix blocks) stays with one tenant
    by_session: dict[int, set[str]] = {}
    for r in a.requests:
        by_session.setdefault(r.block_hashes[min(1, len(r.block_hashes) - 1)], set()).add(r.tenant)
    assert all(len(t) == 1 for t in by_session.values())
    assert a.tenants["big"].credit_share == 0.6


def test_trace_tenants_must_be_declared_without_shares(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"timestamp": 0, "input_length": 10, "output_length": 5, "tenant": "x"}')
    with pytest.raises(InputError, match="x"):
        with_tenancy(load_trace_file(path), tenancy_from_dict({"tenants": {"a": {}}}))
    ok = with_tenancy(load_trace_file(path), tenancy_from_dict({"tenants": {"x": {}}}))
    assert ok.requests[0].tenant == "x"


def test_the_multi_model_sample_declares_its_adapters_on_their_base_model() -> None:
    w = load_trace_file(SAMPLES / "multi_model" / "multi_model_first1200.jsonl")
    asked = {r.adapter for r in w.requests if r.adapter}
    assert asked == set(w.adapters) and len(asked) >= 24  # a few dozen
    assert {a.base for a in w.adapters.values()} == {"llama-3-8b"}
    assert {a.rank for a in w.adapters.values()} == {8, 16, 32, 64}
    assert {r.model for r in w.requests} == {"llama-3-8b", "qwen2-7b", "llama-3-70b"}
    assert all(r.model == "llama-3-8b" for r in w.requests if r.adapter)


@pytest.mark.parametrize(
    ("lines", "field"),
    [
        ([{"adapter": "a"}], "model"),  # an adapter needs its base model
        ([{"model": "m", "adapter": "a", "adapter_rank": 0}], "adapter_rank"),
        (
            [{"model": "m", "adapter": "a"}, {"model": "m", "adapter": "a", "adapter_rank": 8}],
            "adapter",
        ),
    ],
)
def test_bad_adapters_name_the_field(tmp_path: Path, lines: list[dict], field: str) -> None:
    path = tmp_path / "t.jsonl"
    base = {"timestamp": 0, "input_length": 10, "output_length": 2}
    path.write_text("".join(json.dumps(base | line) + "\n" for line in lines))
    with pytest.raises(InputError) as caught:
        load_trace_file(path)
    assert caught.value.field == field
