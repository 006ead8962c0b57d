"""The bench's admissions without a latency forecast: the request cap (with the lower bands'
share of it) and the prefill budget; and how rows are grouped and chosen by admission."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict

from bench.flow.cases import DEFAULT, InFlightCap, Setting, admission_family, choose
from placement.domain.requests import Request
from sim.router import ReplicaView


class First:
    """Always the first replica; counts what it was told."""

    name = "first"

    def __init__(self) -> None:
        self.undone = 0

    def route(self, req: Request, replicas: Sequence[ReplicaView], now: float) -> int:
        return 0

    def on_first_token(self, req: Request, replica: ReplicaView, now: float) -> None:
        pass

    def on_complete(self, req: Request, replica: ReplicaView, now: float) -> None:
        self.undone += 1


def _replica(outstanding: int, prefill_tokens: int) -> ReplicaView:
    v = ReplicaView(0, "r0", model="m", accelerator="H100-SXM", kv_capacity_tokens=1)
    v.outstanding = outstanding
    v.outstanding_prefill_tokens = prefill_tokens
    return v


def _request(band: str, input_tokens: int = 100) -> Request:
    return Request(
        id=1, arrival_s=0.0, input_tokens=input_tokens, output_tokens=10, request_class=band
    )


def _band(req: Request) -> int:
    return 0 if req.request_class == "premium" else 1


def test_lower_bands_are_refused_at_their_share_of_the_cap_and_the_top_band_at_the_cap() -> None:
    inner = First()
    cap = InFlightCap(inner, 8, band_share=0.5, band=_band)
    assert cap.route(_request("standard"), [_replica(3, 0)], 0.0) == 0
    assert cap.route(_request("standard"), [_replica(4, 0)], 0.0) == -1
    assert cap.route(_request("premium"), [_replica(7, 0)], 0.0) == 0
    assert cap.route(_request("premium"), [_replica(8, 0)], 0.0) == -1
    assert inner.undone == 2  # a refusal undoes the inner policy's bookkeeping


def test_the_prefill_budget_counts_prompt_tokens_awaiting_prefill_not_requests() -> None:
    budget = InFlightCap(First(), math.inf, prefill_tokens=4096, band=_band)
    # many requests decoding, nothing awaiting prefill: taken, however long the prompt
    assert budget.route(_request("standard", 30_000), [_replica(200, 0)], 0.0) == 0
    assert budget.route(_request("premium"), [_replica(1, 4096)], 0.0) == 0
    assert budget.route(_request("premium"), [_replica(1, 4097)], 0.0) == -1


def test_rows_are_chosen_within_an_admission_family() -> None:
    assert [admission_family(a) for a in ("gate", "gate0.8", "gate@0.2", "cap", "cap8")] == [
        "gate",
        "gate",
        "gate",
        "cap",
        "cap",
    ]
    assert admission_family("prefill4096") == "prefill"

    def row(setting: Setting, top: float, goodput: float) -> dict[str, object]:
        return {**asdict(setting), "attainment_premium_feasible": top, "goodput_rps": goodput}

    gate = row(DEFAULT, 0.97, 7.0)
    cap = row(Setting(admission="cap", queue="fifo"), 0.90, 6.0)
    cap_refuse = row(Setting(admission="cap", queue="refuse"), 0.99, 9.0)
    prefill = row(Setting(admission="prefill4096", queue="fifo"), 0.97, 7.5)
    rows = [gate, cap, cap_refuse, prefill]
    assert choose(rows) is prefill
    assert choose(rows, family="gate") is gate
    assert choose(rows, family="cap") is cap  # never refusing at once
