"""Checks that a telemetry frame is what its schema promises, before anything is stored or
learned from it.

Every problem is reported at once, in one :class:`~placement.errors.InputError` naming the
column, the rule, how many rows break it and the first such row (by index label). Nothing is
dropped or repaired: a frame either passes whole or is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd
import pyarrow as pa

from placement.domain.accelerators import CATALOGUE, get_accelerator
from placement.errors import InputError
from training.telemetry.schema import (
    REPLICA_SAMPLES,
    REQUEST_COLUMNS,
    REQUESTS,
    SAMPLE_COLUMNS,
    Column,
)

REQUEST_TOKEN_COLUMNS = ("input_tokens", "cached_tokens", "output_tokens")
REQUEST_BACKLOG_COLUMNS = ("backlog_requests", "backlog_prefill_tokens")
REQUEST_LATENCY_COLUMNS = ("ttft_s", "tpot_s", "e2e_s")
SAMPLE_COUNT_COLUMNS = (
    "num_requests_running",
    "num_requests_waiting",
    "prompt_tokens_total",
    "generation_tokens_total",
    "prefix_cache_hit_tokens_total",
    "ttft_seconds_sum",
    "ttft_seconds_count",
    "tpot_seconds_sum",
    "tpot_seconds_count",
)


@dataclass(frozen=True, slots=True)
class Problem:
    column: str
    text: str


def _type_expected(column: Column) -> tuple[Callable[[Any], bool], str]:
    """The dtype test a column must pass and how to describe what was expected."""
    t = column.type
    if pa.types.is_timestamp(t):
        return (
            lambda d: isinstance(d, pd.DatetimeTZDtype),
            "timezone-aware timestamps (UTC)",
        )
    if pa.types.is_integer(t):
        return pd.api.types.is_integer_dtype, "integers"
    if pa.types.is_floating(t):
        return (
            lambda d: pd.api.types.is_numeric_dtype(d) and not pd.api.types.is_bool_dtype(d),
            "numbers",
        )
    return pd.api.types.is_string_dtype, "strings"


def _rows(mask: pd.Series[bool], what: str, column: str, total: int) -> list[Problem]:
    """A problem when any row matches ``mask``: how many, and the first one's index label."""
    n = int(mask.sum())
    if n == 0:
        return []
    first = mask.index[mask.to_numpy()][0]
    return [Problem(column, f"column '{column}': {n} of {total} rows {what} (first: row {first})")]


def _structure(frame: pd.DataFrame, columns: tuple[Column, ...], table: str) -> list[Problem]:
    """Missing columns, wrong dtypes and nulls where the schema forbids them."""
    if not isinstance(frame, pd.DataFrame):
        raise InputError(
            f"{table} telemetry must be a pandas DataFrame, not {type(frame).__name__}",
            source=table,
        )
    missing = [c.name for c in columns if c.name not in frame.columns]
    if missing:
        raise InputError(
            f"missing column{'s' if len(missing) > 1 else ''} "
            + ", ".join(f"'{m}'" for m in missing)
            + f" ({len(frame)} rows refused)",
            source=table,
            field=missing[0],
            expected="the columns of training.telemetry.schema",
        )
    problems: list[Problem] = []
    for c in columns:
        ok, expected = _type_expected(c)
        if not ok(frame[c.name].dtype):
            problems.append(
                Problem(
                    c.name,
                    f"column '{c.name}': dtype {frame[c.name].dtype} is wrong "
                    f"(expected {expected}); all {len(frame)} rows refused",
                )
            )
        elif not c.nullable:
            problems += _rows(frame[c.name].isna(), "are null", c.name, len(frame))
    return problems


def _unknown_accelerators(frame: pd.DataFrame) -> list[Problem]:
    """Accelerators that are not a catalogue kind (aliases are refused too, with a hint, so
    that one kind is never stored under two names)."""
    column = frame["accelerator"]
    unknown = [a for a in column.dropna().unique() if a not in CATALOGUE]
    if not unknown:
        return []
    names = []
    for a in sorted(str(a) for a in unknown):
        try:
            names.append(f"'{a}' (write '{get_accelerator(a).kind}')")
        except InputError:
            names.append(f"'{a}'")
    return _rows(
        column.isin(unknown),
        "name an unknown accelerator: " + ", ".join(names),
        "accelerator",
        len(frame),
    )


class _Rules:
    """The row-level rules of one frame. A rule is skipped when one of the columns it reads
    already failed the structure checks, since comparing a wrongly typed column means nothing."""

    def __init__(self, frame: pd.DataFrame, problems: list[Problem]) -> None:
        self.frame = frame
        self.problems = problems
        self.bad = {p.column for p in problems}

    def rule(
        self,
        columns: tuple[str, ...],
        breaks: Callable[[pd.DataFrame], pd.Series[bool]],
        what: str,
    ) -> None:
        """Report the rows where ``breaks(frame)`` holds, under the first of ``columns``."""
        if self.bad.isdisjoint(columns):
            mask = breaks(self.frame).fillna(False).astype(bool)
            self.problems.extend(_rows(mask, what, columns[0], len(self.frame)))

    def not_negative(self, columns: tuple[str, ...]) -> None:
        for c in columns:
            self.rule((c,), lambda f, c=c: f[c] < 0, "are negative")  # type: ignore[misc]

    def known_accelerators(self) -> None:
        if "accelerator" not in self.bad:
            self.problems.extend(_unknown_accelerators(self.frame))


def _raise(problems: list[Problem], table: str) -> None:
    if problems:
        raise InputError(
            f"{len(problems)} problem{'s' if len(problems) > 1 else ''} in {table} telemetry: "
            + "; ".join(p.text for p in problems),
            source=table,
            field=problems[0].column,
            expected="telemetry as documented in training.telemetry.schema",
        )


def validate_requests(frame: pd.DataFrame) -> None:
    """Refuse a per-request frame that breaks the ``requests`` schema or its rules: missing
    columns, wrong dtypes, nulls in required columns, negative token counts, router backlog
    counters or latencies, cached > input tokens, a first token before arrival or a finish
    before the first token, a served request (``error == ""``) without its times or replica
    details, unknown accelerators.
    Request ids may repeat (they are unique within one producer's run only). Raises
    InputError naming every column and row count."""
    problems = _structure(frame, REQUEST_COLUMNS, REQUESTS)
    rules = _Rules(frame, problems)
    rules.not_negative(REQUEST_TOKEN_COLUMNS + REQUEST_BACKLOG_COLUMNS + REQUEST_LATENCY_COLUMNS)
    rules.rule(
        ("cached_tokens", "input_tokens"),
        lambda f: f["cached_tokens"] > f["input_tokens"],
        "exceed input_tokens",
    )
    rules.rule(
        ("first_token_time", "arrival_time"),
        lambda f: f["first_token_time"] < f["arrival_time"],
        "are before arrival_time",
    )
    rules.rule(
        ("finish_time", "first_token_time", "arrival_time"),
        lambda f: (
            (f["finish_time"] < f["first_token_time"]) | (f["finish_time"] < f["arrival_time"])
        ),
        "are before first_token_time or arrival_time",
    )
    rules.rule(("tp",), lambda f: f["tp"] < 1, "are below 1")
    for c in ("first_token_time", "finish_time", "replica", "accelerator", "model", "tp"):
        rules.rule(
            (c, "error"),
            lambda f, c=c: (f["error"] == "") & f[c].isna(),  # type: ignore[misc]
            "are null for a served request",
        )
    rules.known_accelerators()
    _raise(problems, REQUESTS)


def validate_samples(frame: pd.DataFrame) -> None:
    """Refuse a per-replica sample frame that breaks the ``replica_samples`` schema or its
    rules: missing columns, wrong dtypes, nulls in required columns, negative gauges, counters
    or histogram sums/counts, a KV-cache usage outside 0..1, tp below 1, unknown accelerators,
    two samples of one replica at the same instant. Raises InputError naming every column and
    row count."""
    problems = _structure(frame, SAMPLE_COLUMNS, REPLICA_SAMPLES)
    rules = _Rules(frame, problems)
    rules.not_negative(SAMPLE_COUNT_COLUMNS)
    rules.rule(
        ("kv_cache_usage_perc",),
        lambda f: (f["kv_cache_usage_perc"] < 0) | (f["kv_cache_usage_perc"] > 1),
        "are outside 0..1",
    )
    rules.rule(("tp",), lambda f: f["tp"] < 1, "are below 1")
    rules.known_accelerators()
    rules.rule(
        ("time", "replica"),
        lambda f: f.duplicated(["replica", "time"]),
        "repeat an earlier (replica, time)",
    )
    _raise(problems, REPLICA_SAMPLES)


def validate_sample_row(row: Mapping[str, Any]) -> None:
    """The rules of :func:`validate_samples` for one sample built in code (a scrape): every
    column present, counters not negative, a KV-cache usage in 0..1, tp of at least 1, a known
    accelerator — without building a table (a scraper checks eight rows a second)."""
    missing = [c.name for c in SAMPLE_COLUMNS if c.name not in row]
    if missing:
        raise InputError(f"missing {', '.join(missing)}", source=REPLICA_SAMPLES, field=missing[0])
    for column in SAMPLE_COUNT_COLUMNS:
        value = row[column]
        if value is not None and not value >= 0:
            raise InputError(
                f"{column} is {value}", source=REPLICA_SAMPLES, field=column, expected="≥ 0"
            )
    kv = row["kv_cache_usage_perc"]
    if kv is None or not 0.0 <= kv <= 1.0:
        raise InputError(
            f"kv_cache_usage_perc is {kv}",
            source=REPLICA_SAMPLES,
            field="kv_cache_usage_perc",
            expected="0..1",
        )
    if row["tp"] is None or row["tp"] < 1:
        raise InputError(f"tp is {row['tp']}", source=REPLICA_SAMPLES, field="tp", expected="≥ 1")
    get_accelerator(str(row["accelerator"]), source=REPLICA_SAMPLES, field="accelerator")
