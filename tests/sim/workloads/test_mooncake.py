"""The Mooncake loader on the shipped sample, on malformed files, and (when present) in full."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from placement.domain.prefix import shared_prefix_blocks
from placement.errors import InputError
from placement.paths import repo_root, shared_data
from sim.workloads.mooncake import MOONCAKE_TRACE, load_mooncake

SAMPLE = repo_root() / "data/samples/mooncake/conversation_trace_first300.jsonl"
GOOD = {"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [0, 1]}


def raw_records() -> list[dict[str, Any]]:
    return [json.loads(line) for line in SAMPLE.read_text().splitlines()]


def write_lines(path: Path, records: Sequence[object]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


def test_sample_shape_and_order() -> None:
    workload = load_mooncake(SAMPLE)
    raw = raw_records()
    assert len(workload) == len(raw) == 300
    assert [r.id for r in workload.requests] == list(range(300))
    arrivals = [r.arrival_s for r in workload.requests]
    assert arrivals[0] == 0.0
    assert arrivals == sorted(arrivals)
    assert workload.block_tokens == 512
    first_ms = raw[0]["timestamp"]
    for request, record in zip(workload.requests, raw, strict=True):  # the sample is sorted
        assert request.arrival_s == pytest.approx((record["timestamp"] - first_ms) / 1000)
        assert request.input_tokens == record["input_length"]
        assert request.output_tokens == record["output_length"]
        assert len(request.block_hashes) == math.ceil(request.input_tokens / 512)
        assert (request.tenant, request.request_class, request.model) == (
            "default",
            "interactive",
            "",
        )
    assert set(workload.tenants) == {"default"}


def test_every_request_shares_block_zero() -> None:
    workload = load_mooncake(SAMPLE)
    assert len({r.block_hashes[0] for r in workload.requests}) == 1


def test_hash_sharing_matches_the_trace_ids() -> None:
    """Two requests share k chained hashes exactly when the trace gives them k common ids."""
    workload = load_mooncake(SAMPLE)
    ids = [r["hash_ids"] for r in raw_records()]
    deeper = 0
    for i in range(0, 300, 7):
        for j in range(i + 1, 300, 5):
            expected = shared_prefix_blocks(ids[i], ids[j])
            got = shared_prefix_blocks(
                workload.requests[i].block_hashes, workload.requests[j].block_hashes
            )
            assert got == expected
            deeper += expected > 1
    assert deeper > 0  # the sample does contain sharing beyond block 0


def test_limit_keeps_the_first_arrivals() -> None:
    workload = load_mooncake(SAMPLE, limit=10)
    assert [r.id for r in workload.requests] == list(range(10))
    assert workload.requests[-1].arrival_s <= load_mooncake(SAMPLE).requests[10].arrival_s


def test_unsorted_lines_are_sorted_stably(tmp_path: Path) -> None:
    records = [
        {**GOOD, "timestamp": 5000, "input_length": 100, "hash_ids": [9]},
        {**GOOD, "timestamp": 1000, "input_length": 200, "hash_ids": [8]},
        {**GOOD, "timestamp": 1000, "input_length": 300, "hash_ids": [7]},
    ]
    workload = load_mooncake(write_lines(tmp_path / "t.jsonl", records))
    assert [r.input_tokens for r in workload.requests] == [200, 300, 100]
    assert [r.arrival_s for r in workload.requests] == [0.0, 0.0, 4.0]
    assert [r.id for r in workload.requests] == [0, 1, 2]


@pytest.mark.parametrize(
    ("bad_line", "field"),
    [
        ('{"timestamp": 1, "input_length": 600', None),  # bad JSON
        ({"timestamp": 1, "output_length": 5, "hash_ids": [0, 1]}, "input_length"),
        ({**GOOD, "output_length": -1}, "output_length"),
        ({**GOOD, "input_length": 12.5}, "input_length"),
        ({**GOOD, "hash_ids": [0, "x"]}, "hash_ids"),
        ({**GOOD, "hash_ids": [0, 1.5]}, "hash_ids"),
        ({**GOOD, "hash_ids": [0, 1, 2]}, "hash_ids"),  # 3 ids for 600 tokens
        ({**GOOD, "timestamp": -3}, "timestamp"),
        ({**GOOD, "timestamp": "soon"}, "timestamp"),
        ([1, 2, 3], None),
    ],
)
def test_malformed_line_names_file_line_and_field(
    tmp_path: Path, bad_line: object, field: str | None
) -> None:
    path = write_lines(tmp_path / "bad.jsonl", [GOOD, GOOD, bad_line, GOOD])
    with pytest.raises(InputError) as caught:
        load_mooncake(path)
    assert caught.value.line == 3
    assert f"{path}:3" in str(caught.value)
    assert caught.value.field == field
    if field is not None:
        assert field in str(caught.value)


def test_missing_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"absent\.jsonl"):
        load_mooncake(tmp_path / "absent.jsonl")


@pytest.mark.skipif(not (shared_data() / MOONCAKE_TRACE).exists(), reason="no shared data")
def test_full_trace() -> None:
    workload = load_mooncake()
    assert len(workload) == 6758
    assert workload.duration_s == pytest.approx(2097.0)
    assert len({r.block_hashes[0] for r in workload.requests}) == 1
