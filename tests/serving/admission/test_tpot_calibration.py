"""The chunk shares a replica's decodes really saw, learned from its completions."""

from __future__ import annotations

import pytest

from serving.admission.tpot_calibration import (
    BINS,
    DECAY,
    ChunkShares,
    TpotCalibration,
    chunk_share,
    gaps_bucket,
)


@pytest.mark.parametrize(
    ("gaps", "bucket"), [(1, 0), (3, 0), (4, 1), (15, 1), (16, 2), (63, 2), (64, 3), (256, 4)]
)
def test_decodes_are_kept_apart_by_length(gaps: int, bucket: int) -> None:
    assert gaps_bucket(gaps) == bucket


@pytest.mark.parametrize(
    ("tpot", "share"),
    [(0.02, 0.0), (0.01, 0.0), (0.08, 0.5), (0.14, 1.0), (0.3, 1.0)],
)
def test_a_tpot_is_placed_between_the_decode_only_and_the_full_chunk_step(
    tpot: float, share: float
) -> None:
    assert chunk_share(tpot, 0.02, 0.14) == pytest.approx(share)
    assert chunk_share(0.05, 0.1, 0.1) == 0.0  # no span: nothing to place


def test_the_share_past_a_point_counts_the_bins_above_it() -> None:
    weights = [0.0] * BINS
    weights[0] = 3.0  # decoded alone
    weights[BINS - 1] = 1.0  # a full chunk in every iteration
    shares = ChunkShares(tuple(weights))
    assert shares.total == 4.0
    assert shares.past(0.5) == pytest.approx(0.25)
    assert shares.past(0.0) == pytest.approx(0.25 + 0.75 * (1 - 0.0))  # its own bin, all above
    assert ChunkShares((0.0,) * BINS).past(0.3) == 0.0


def test_a_completion_is_learned_from_its_first_token_and_its_end() -> None:
    cal = TpotCalibration()
    assert cal.shares("a100", 10) is None
    # decode-only 0.02 s, full chunk 0.14 s; 11 tokens over 1.4 s: full chunks throughout
    cal.dispatched(1, "a100", 0.02, 0.14)
    cal.first_token(1, 10.0)
    cal.finished(1, 11, 11.4)
    seen = cal.shares("a100", 10)
    assert seen is not None and seen.total == pytest.approx(1.0)
    assert seen.past(0.7) == pytest.approx(1.0)
    assert cal.shares("a100", 500) is None  # a long decode learns apart
    assert cal.shares("l40s", 10) is None


def test_what_cannot_be_learned_from_is_ignored() -> None:
    cal = TpotCalibration()
    cal.dispatched(1, "r", 0.02, 0.14)
    cal.finished(1, 11, 5.0)  # no first token reported
    cal.dispatched(2, "r", 0.02, 0.14)
    cal.first_token(2, 1.0)
    cal.finished(2, 1, 2.0)  # one output token: no TPOT
    cal.dispatched(3, "r", 0.05, 0.04)  # a kind whose full chunk is no slower: nothing to learn
    cal.first_token(3, 1.0)
    cal.finished(3, 11, 2.0)
    cal.finished(99, 11, 2.0)  # never dispatched
    assert cal.shares("r", 10) is None


def test_old_completions_fade() -> None:
    cal = TpotCalibration()
    for k in range(200):
        cal.dispatched(k, "r", 0.02, 0.14)
        cal.first_token(k, 0.0)
        late = k < 100  # the first hundred decoded through full chunks, the rest alone
        cal.finished(k, 11, 1.4 if late else 0.2)
    seen = cal.shares("r", 10)
    assert seen is not None
    assert seen.total == pytest.approx((1 - (1 - DECAY) ** 200) / DECAY)
    recent = (1 - DECAY) ** 100  # the weight of a completion a hundred ago
    assert seen.past(0.7) == pytest.approx(recent / (1 + recent))
