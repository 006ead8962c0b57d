"""Demand: a window of requests aggregated per tenant × model × request class × prefix group.

Every request lands in exactly one **demand unit**: the deepest prefix group on its chain
(:mod:`placement.solver.prefix_groups`), or its (tenant, model, class) default when none
matches. A unit carries what the solver needs: its rate (req/s over the window), mean prompt
and output tokens, and the prefix tokens a warm replica skips (0 for defaults); and what the
plan's attainment model reads of the requests behind those means: the prompts' squared
coefficient of variation and the unit's arrival times (:mod:`placement.solver.arrivals`).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from placement.domain.llm import get_model
from placement.errors import InputError, UnknownModel
from placement.solver.prefix_groups import DEFAULT_RULE, GroupRule, assign_groups, find_groups

DEFAULT_KEY = -1  # group key of a default unit (real keys are ≥ 0)


@dataclass(frozen=True, slots=True, kw_only=True)
class DemandUnit:
    tenant: str
    model: str
    request_class: str
    key: int  # prefix group key, DEFAULT_KEY for the default
    depth_blocks: int
    rate_rps: float
    mean_input_tokens: float
    output_tokens: float
    prefix_tokens: int
    # squared coefficient of variation of the unit's prompt tokens (0: all the same length)
    prompt_scv: float = 0.0
    # the unit's arrival times (s), sorted
    arrivals: tuple[float, ...] = ()

    @property
    def is_group(self) -> bool:
        return self.key != DEFAULT_KEY


@dataclass(frozen=True, slots=True)
class _Record:
    tenant: str
    model: str
    request_class: str
    block_hashes: tuple[int, ...]
    input_tokens: int
    output_tokens: int
    arrival_s: float


class RequestLike(Protocol):
    """What is read from each request (``placement.domain.requests.Request`` has it)."""

    @property
    def tenant(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def request_class(self) -> str: ...
    @property
    def block_hashes(self) -> tuple[int, ...]: ...
    @property
    def input_tokens(self) -> int: ...
    @property
    def output_tokens(self) -> int: ...
    @property
    def arrival_s(self) -> float: ...


def window_span(requests: Sequence[RequestLike]) -> float:
    """The window a list of requests covers (s): first to last arrival, at least 1 s."""
    if not requests:
        return 1.0
    times = [r.arrival_s for r in requests]
    return max(max(times) - min(times), 1.0)


def _context_tokens(model: str) -> int:
    """The model's context window, or no bound for a model outside the catalogue.

    No request longer than it can be served, so none counts for more in a unit's mean: one
    malformed 9-million-token request would otherwise make its whole unit unservable and
    shed the tenant's ordinary traffic with it."""
    try:
        return get_model(model).context_tokens
    except UnknownModel:
        return sys.maxsize


def aggregate_demand(
    requests: Iterable[RequestLike],
    *,
    window_s: float,
    block_tokens: int,
    default_model: str | None = None,
    rule: GroupRule = DEFAULT_RULE,
) -> list[DemandUnit]:
    """Demand units of a window. A request without a model takes ``default_model`` (the fleet's
    model when it serves one); without either it is an :class:`InputError`."""
    if window_s <= 0:
        raise InputError(f"window of {window_s} s", field="window_s", expected="> 0 seconds")
    records: list[_Record] = []
    for r in requests:
        model = r.model or default_model
        if not model:
            raise InputError(
                "a request names no model and the fleet serves several",
                field="model",
                expected="requests that name their model",
            )
        context = _context_tokens(model)
        records.append(
            _Record(
                r.tenant,
                model,
                r.request_class,
                tuple(r.block_hashes),
                min(r.input_tokens, context),
                min(r.output_tokens, context),
                float(r.arrival_s),
            )
        )
    groups = find_groups(records, window_s=window_s, block_tokens=block_tokens, rule=rule)
    assigned = assign_groups(records, groups)
    sums: dict[tuple[str, str, str, int], list[float]] = {}
    depth: dict[tuple[str, str, str, int], int] = {}
    times: dict[tuple[str, str, str, int], list[float]] = {}
    for rec, group in zip(records, assigned, strict=True):
        key = group.key if group is not None else DEFAULT_KEY
        uid = (rec.tenant, rec.model, rec.request_class, key)
        acc = sums.setdefault(uid, [0.0, 0.0, 0.0, 0.0])
        acc[0] += 1
        acc[1] += rec.input_tokens
        acc[2] += rec.output_tokens
        acc[3] += float(rec.input_tokens) ** 2
        times.setdefault(uid, []).append(rec.arrival_s)
        depth[uid] = group.depth_blocks if group is not None else 0
    units = []
    for uid in sorted(sums):
        n, inp, out, sq = sums[uid]
        tenant, model, cls, key = uid
        mean_input = inp / n
        scv = max(sq / n / mean_input**2 - 1.0, 0.0) if mean_input > 0 else 0.0
        prefix = min(depth[uid] * block_tokens, int(mean_input))
        units.append(
            DemandUnit(
                tenant=tenant,
                model=model,
                request_class=cls,
                key=key,
                depth_blocks=depth[uid],
                rate_rps=n / window_s,
                mean_input_tokens=mean_input,
                output_tokens=max(out / n, 1.0),
                prefix_tokens=prefix,
                prompt_scv=scv,
                arrivals=tuple(sorted(times[uid])),
            )
        )
    return units
