"""How well the admission gate judges: a shadow run admits every request and records which the
gate would have refused; each of those either met its SLO anyway (a refusal that cost goodput)
or missed it (a refusal that was right).

- **precision**: of the requests the gate would refuse, the share that missed their SLO when
  admitted;
- **recall**: of the requests that missed their SLO when all were admitted, the share the gate
  would have refused.

Both per prompt-length bucket too, since long prompts are where a TTFT bound errs: the gate
must judge them by what they really cost (chunked prefill, the prefix already cached, the
queue ahead), not by their length.

And per **rule** (``by_rule``: forecast TTFT over its limit, certain TPOT over its limit, or a
tenant over credit yielding under pressure), with the refused requests' forecast against what
they saw when admitted (``forecast_error``: medians of actual over forecast TTFT and TPOT), so
a rule that errs says which estimate to fix; and per rule and **decode length**
(``by_rule_decode``, :data:`DECODE_BUCKETS`): a short decode's TPOT is all or nothing, decided
by a burst of prompts after it is admitted, a long one's the average prompt work of its whole
span, and the TPOT rule errs differently on each (bench/RESULTS.md, "The TPOT rule's refusals").

And per **chance** the gate gave the miss (``by_chance``, :data:`CHANCE_BANDS`): a gate whose
chances are right has, in each band, a precision within it — so refusals at a chance under
0.9 (past capacity the threshold falls to 0.5, and to 0.3 in the strict regime) cannot reach
the 0.9 precision issue 14 §2 asks for, however well the gate forecasts (bench/RESULTS.md,
"The gate's precision is its threshold").
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np

from placement.domain.requests import Request, RequestClass
from serving.admission.slo_gate import Judgement
from sim.metrics import RequestTable, request_table

#: Prompt-length buckets, tokens: [lower, upper).
PROMPT_BUCKETS: tuple[tuple[str, int, float], ...] = (
    ("<4k", 0, 4096),
    ("4-16k", 4096, 16384),
    ("16-32k", 16384, 32768),
    (">=32k", 32768, float("inf")),
)


#: Decode-length buckets, decode iterations (output tokens − 1): [lower, upper).
DECODE_BUCKETS: tuple[tuple[str, int, float], ...] = (
    ("<16", 0, 16),
    ("16-255", 16, 256),
    (">=256", 256, float("inf")),
)


#: Bands of the chance of a miss the gate judged a refused request at: [lower, upper).
CHANCE_BANDS: tuple[tuple[str, float, float], ...] = (
    ("<0.5", 0.0, 0.5),
    ("0.5-0.7", 0.5, 0.7),
    ("0.7-0.9", 0.7, 0.9),
    (">=0.9", 0.9, float("inf")),
)


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def gate_quality(
    requests: Sequence[Request],
    classes: dict[str, RequestClass],
    would_refuse: Collection[int],
    judgements: Mapping[int, Judgement] | None = None,
) -> dict[str, Any]:
    """Precision, recall and refused share of the gate over a shadow run's ``requests``
    (``would_refuse``: ids of those it would have refused), overall and per prompt bucket;
    per rule, decode length and judged chance of a miss when the gate's ``judgements`` of the
    refused requests are given."""
    table = request_table(list(requests), classes)
    ids = np.fromiter((r.id for r in requests), np.int64, len(requests))
    refused = np.isin(ids, np.fromiter(would_refuse, np.int64, len(would_refuse)))
    missed = ~table.met

    def stats(mask: np.ndarray[Any, np.dtype[np.bool_]]) -> dict[str, Any]:
        n, r, m = int(mask.sum()), int((refused & mask).sum()), int((missed & mask).sum())
        right = int((refused & missed & mask).sum())
        return {
            "requests": n,
            "refused": r,
            "missed_if_admitted": m,
            "refused_share": _share(r, n),
            "precision": _share(right, r),
            "recall": _share(right, m),
        }

    overall = stats(np.ones(len(ids), dtype=bool))
    tokens = table.input_tokens
    overall["by_prompt_bucket"] = {
        name: stats((tokens >= lo) & (tokens < hi)) for name, lo, hi in PROMPT_BUCKETS
    }
    if judgements is not None:
        rules = np.array([judgements[i].rule if i in judgements else "" for i in ids.tolist()])
        overall["by_rule"] = {
            rule: stats(refused & (rules == rule)) for rule in sorted(set(rules[refused]))
        }
        gaps = table.output_tokens - 1
        overall["by_rule_decode"] = {
            rule: {
                name: stats(refused & (rules == rule) & (gaps >= lo) & (gaps < hi))
                for name, lo, hi in DECODE_BUCKETS
            }
            for rule in sorted(set(rules[refused]))
        }
        chance = np.array(
            [judgements[i].miss_probability if i in judgements else 0.0 for i in ids.tolist()]
        )
        overall["by_chance"] = {
            name: stats(refused & (chance >= lo) & (chance < hi)) for name, lo, hi in CHANCE_BANDS
        }
        overall["forecast_error"] = _forecast_error(requests, table, judgements)
    return overall


def _median(values: list[float]) -> float | None:
    return float(np.median(values)) if values else None


def _forecast_error(
    requests: Sequence[Request], table: RequestTable, judgements: Mapping[int, Judgement]
) -> dict[str, float | None]:
    """Medians over the refused requests of actual ÷ forecast TTFT, and of actual ÷ expected
    TPOT (requests with a TPOT forecast), as seen when admitted anyway."""
    ttft: list[float] = []
    tpot: list[float] = []
    for k, r in enumerate(requests):
        j = judgements.get(r.id)
        if j is None or j.forecast is None or not table.completed[k]:
            continue
        if j.forecast.ttft_s > 0:
            ttft.append(float(table.ttft[k]) / j.forecast.ttft_s)
        if j.forecast.tpot_s > 0 and not np.isnan(table.tpot[k]):
            tpot.append(float(table.tpot[k]) / j.forecast.tpot_s)
    return {"ttft_actual_over_forecast": _median(ttft), "tpot_actual_over_forecast": _median(tpot)}
