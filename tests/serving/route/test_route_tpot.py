"""Predicted TPOT before any is observed: a per-kind table over running sequences."""

from __future__ import annotations

import pytest

from serving.route.tpot import GENERIC_TPOT_S, decode_table


def test_tpot_grows_with_running_sequences_and_interpolates() -> None:
    table = decode_table("H100-SXM", "llama-3-8b", 1)
    values = [table.tpot(d) for d in (0, 1, 5, 40, 300, 5000)]
    assert values == sorted(values)
    assert 0.005 < values[0] < 0.02  # an idle 8B on an H100 decodes in ~10 ms a token
    lo, hi = table.tpot_s[5], table.tpot_s[6]  # d = 31 and 63
    assert table.tpot(47) == pytest.approx((lo + hi) / 2)


def test_a_slower_kind_predicts_a_slower_tpot() -> None:
    assert decode_table("L40S", "llama-3-8b", 1).tpot(8) > decode_table(
        "H100-SXM", "llama-3-8b", 1
    ).tpot(8)


def test_an_unknown_kind_gets_the_generic_table() -> None:
    assert decode_table("TPU-v9", "llama-3-8b", 1).tpot(3) == GENERIC_TPOT_S
