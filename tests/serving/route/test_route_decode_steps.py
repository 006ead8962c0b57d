"""Decode iteration times per replica kind (what a predicted TPOT is built from)."""

from __future__ import annotations

import pytest

from serving.route.decode_steps import DecodeStepTable, decode_step_table


def test_decode_steps_grow_with_sequences_and_context() -> None:
    t = decode_step_table("L40S", "llama-3-8b", 1)
    steps = [t.decode_step(n, 0.0) for n in (1, 8, 64, 256)]
    assert steps == sorted(steps) and steps[0] > 0
    assert t.decode_step(64, 100_000.0) > t.decode_step(64, 0.0)
    assert t.prompt_budget(48.0) == t.chunk_tokens - 48


def _full_chunk_step(table: DecodeStepTable, sequences: int = 32) -> float:
    budget = table.prompt_budget(sequences)
    return table.decode_step(sequences, 30_000) + table.prefill_s_per_token * budget


def test_a_full_chunk_is_under_an_interactive_tpot_on_an_h100_not_on_an_l40s() -> None:
    """The physics the TPOT forecast rests on: with the calibration the shipped fleets show
    (0.62 and 0.72 of the roofline's prefill time), a decode step carrying a full prompt chunk
    stays under 100 ms on an H100 and not on an L40S."""
    h100 = decode_step_table("H100-SXM", "llama-3-8b", 1)
    l40s = decode_step_table("L40S", "llama-3-8b", 1)
    assert _full_chunk_step(h100) < _full_chunk_step(l40s)
    h100_step, l40s_step = h100.decode_step(32, 30_000), l40s.decode_step(32, 30_000)
    assert h100_step + 0.62 * (_full_chunk_step(h100) - h100_step) < 0.1
    assert l40s_step + 0.72 * (_full_chunk_step(l40s) - l40s_step) > 0.1


def test_unknown_kind_gets_the_generic_table() -> None:
    t = decode_step_table("NoSuchGPU", "llama-3-8b", 1)
    assert t.label == "generic" and t.decode_step(4, 1_000) > 0


def test_a_prompt_token_computed_after_a_long_cached_prefix_costs_its_attention_too() -> None:
    table = decode_step_table("A100-80G", "llama-3-8b", 1)
    assert table.pair_s > 0.0
    short = table.prompt_work_s(1_000)
    after = table.prompt_work_s(9_000, cached_tokens=8_000)  # the same 1,000 tokens computed
    assert short >= 1_000 * table.prefill_s_per_token
    assert after > short  # each attends to the 8,000 cached before it
    assert after - short == pytest.approx(1_000 * 8_000 * table.pair_s)
    assert table.prompt_work_s(500, cached_tokens=900) == 0.0  # nothing to compute
