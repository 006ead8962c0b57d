"""The Mooncake slice as aiperf's trace file: timestamps in order, prompts of the trace's size."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.e2e.trace_file import slice_at_load, write_trace
from bench.trace_text import TraceText
from placement.domain.fleet import load_fleet
from placement.errors import InputError
from sim.workloads.mooncake import load_mooncake


def test_the_slice_is_written_with_its_tokens_and_timestamps(tmp_path: Path) -> None:
    workload = load_mooncake(limit=400)
    fleet = load_fleet(Path("data/fleets/h100x8.yaml"))
    window = slice_at_load(workload, fleet, load=1.0, start_s=0.0, duration_s=3.0)
    text = TraceText()
    written = write_trace(tmp_path / "t.jsonl", window, text, load=1.0)
    lines = [json.loads(x) for x in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert written.requests == len(lines) == len(window.requests) > 0
    stamps = [x["timestamp"] for x in lines]
    assert stamps == sorted(stamps) and stamps[0] >= 0 and stamps[-1] < 3000
    first = window.requests[0]
    assert len(text.tokenizer.encode(lines[0]["text_input"])) == first.input_tokens
    assert lines[0]["output_length"] == max(1, first.output_tokens)


def test_a_window_with_no_request_is_refused() -> None:
    workload = load_mooncake(limit=50)
    fleet = load_fleet(Path("data/fleets/h100x8.yaml"))
    with pytest.raises(InputError, match="no request"):
        slice_at_load(workload, fleet, load=1.0, start_s=1e7, duration_s=1.0)
