"""Scrape a vLLM replica's Prometheus ``/metrics`` into one ``replica_samples`` row.

The text is parsed with ``prometheus_client``'s exposition parser. Metric names, current and
older (vLLM v1 renamed some in 0.9 and later deprecated the TPOT histogram):

==============================  ========================================================
column                          vLLM metric (first name present wins)
==============================  ========================================================
num_requests_running            ``vllm:num_requests_running`` (gauge)
num_requests_waiting            ``vllm:num_requests_waiting`` (gauge)
kv_cache_usage_perc             ``vllm:kv_cache_usage_perc``, older ``vllm:gpu_cache_usage_perc``
prompt_tokens_total             ``vllm:prompt_tokens_total`` (counter)
generation_tokens_total         ``vllm:generation_tokens_total`` (counter)
prefix_cache_hit_tokens_total   ``vllm:prefix_cache_hits_total``, older
                                ``vllm:gpu_prefix_cache_hits_total`` (counter, tokens)
ttft_seconds_sum / _count       ``vllm:time_to_first_token_seconds`` (histogram)
tpot_seconds_sum / _count       ``vllm:inter_token_latency_seconds``, older
                                ``vllm:time_per_output_token_seconds`` (histogram)
==============================  ========================================================

vLLM labels every series with ``model_name`` (the served model) and ``engine`` (one per
data-parallel engine core). One served model is read: gauges and counters are summed over its
engines, except the KV-cache usage, a fraction of each engine's own cache, which is averaged.
``vllm:prefix_cache_queries_total`` is only used to check that hits never exceed queries. An
engine that exports no prefix-cache counter records 0 hits; no histogram gives nulls.
"""

from __future__ import annotations

import re
import urllib.error
import urllib.parse
import urllib.request
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from placement.domain.accelerators import get_accelerator
from placement.errors import InputError, ScrapeFailed
from training.telemetry.validate import validate_sample_row

# column → the sample names that feed it, preferred first
RUNNING = ("vllm:num_requests_running",)
WAITING = ("vllm:num_requests_waiting",)
KV_USAGE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
PROMPT_TOKENS = ("vllm:prompt_tokens_total",)
GENERATION_TOKENS = ("vllm:generation_tokens_total",)
PREFIX_HITS = ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total")
PREFIX_QUERIES = ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total")
TTFT = ("vllm:time_to_first_token_seconds",)
TPOT = ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds")
REQUIRED = (RUNNING, WAITING, KV_USAGE, PROMPT_TOKENS, GENERATION_TOKENS)

ACCEPT = "text/plain;version=0.0.4"
DEFAULT_TIMEOUT_S = 2.0


class _Series:
    """The values of each ``vllm:`` sample name for one served model, one per engine."""

    def __init__(self, values: dict[str, list[float]]) -> None:
        self.values = values

    def first(self, names: tuple[str, ...]) -> tuple[str, list[float]] | None:
        for name in names:
            if self.values.get(name):
                return name, self.values[name]
        return None

    def total(self, names: tuple[str, ...]) -> float:
        """Sum over engines of the first name present (0 when none is)."""
        found = self.first(names)
        return sum(found[1]) if found else 0.0

    def mean(self, names: tuple[str, ...]) -> float:
        """Mean over engines of the first name present (0 when none is)."""
        found = self.first(names)
        return sum(found[1]) / len(found[1]) if found else 0.0


_SAMPLE_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*(?=[{ \t])")
_READ = frozenset(
    [
        *(
            n
            for names in (RUNNING, WAITING, KV_USAGE, PROMPT_TOKENS, GENERATION_TOKENS)
            for n in names
        ),
        *PREFIX_HITS,
        *PREFIX_QUERIES,
        *(base + end for base in (*TTFT, *TPOT) for end in ("_sum", "_count")),
    ]
)


def _kept(line: str) -> bool:
    """Whether a line of exposition text is worth parsing: a sample this module reads, or a
    line that is neither a sample nor a comment (which the parser then refuses)."""
    if not line or line[0] == "#":
        return False
    name = _SAMPLE_NAME.match(line)
    return name is None or name.group() in _READ


def _samples_by_model(text: str, source: str) -> dict[str, dict[str, list[float]]]:
    """``model_name`` → sample name → values (one per label set) of every ``vllm:`` sample."""
    by_model: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    # the replica scraper parses every replica's page every second with a parser that reads
    # character by character: give it only the samples read below (and any line that is not a
    # sample at all, so text that is not Prometheus exposition is still refused)
    text = "\n".join(line for line in text.splitlines() if _kept(line))
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name.startswith("vllm:") and "le" not in sample.labels:
                    model = sample.labels.get("model_name", "")
                    by_model[model][sample.name].append(float(sample.value))
    except ValueError as exc:
        raise InputError(
            f"not Prometheus text exposition ({exc})",
            source=source,
            expected="the text a vLLM /metrics endpoint serves",
        ) from None
    return by_model


def _select_model(
    by_model: dict[str, dict[str, list[float]]], model_name: str | None, source: str
) -> _Series:
    if not by_model:
        raise InputError(
            "no vllm: metrics in the text", source=source, expected="a vLLM /metrics page"
        )
    if model_name is None:
        if len(by_model) > 1:
            raise InputError(
                "metrics of several served models: " + ", ".join(sorted(by_model)),
                source=source,
                field="model_name",
                expected="the served model_name to read",
            )
        model_name = next(iter(by_model))
    if model_name not in by_model:
        raise InputError(
            f"no metrics for model_name '{model_name}'",
            source=source,
            field="model_name",
            expected="one of " + ", ".join(sorted(by_model)),
        )
    return _Series(by_model[model_name])


def _histogram(series: _Series, bases: tuple[str, ...]) -> tuple[float | None, float | None]:
    """(sum, count) of the first histogram present, summed over engines; (None, None) if
    there is none."""
    for base in bases:
        sums = series.values.get(base + "_sum")
        counts = series.values.get(base + "_count")
        if sums and counts:
            return sum(sums), sum(counts)
    return None, None


def parse_vllm_metrics(
    text: str,
    *,
    replica: str,
    accelerator: str,
    model: str,
    tp: int,
    time: datetime,
    model_name: str | None = None,
    source: str = "<metrics>",
) -> dict[str, Any]:
    """One ``replica_samples`` row (a dict keyed by column) from vLLM's ``/metrics`` text.

    ``model_name`` picks the served model when the text holds several (else the only one is
    read); ``accelerator`` may be an alias (stored as the catalogue kind). Raises InputError
    naming ``source`` when the text is not Prometheus exposition, lacks a required vLLM
    metric, or gives values the schema refuses (e.g. a KV-cache usage above 1).
    """
    series = _select_model(_samples_by_model(text, source), model_name, source)
    kind = get_accelerator(accelerator, source=source, field="accelerator").kind
    missing = [" or ".join(names) for names in REQUIRED if series.first(names) is None]
    if missing:
        raise InputError(
            "missing " + "; ".join(missing), source=source, expected="vLLM's Prometheus metrics"
        )
    hits = series.total(PREFIX_HITS)
    queries = series.first(PREFIX_QUERIES)
    if queries is not None and hits > sum(queries[1]):
        raise InputError(
            f"prefix-cache hits ({hits:.0f}) exceed queries ({sum(queries[1]):.0f})",
            source=source,
            field="prefix_cache_hit_tokens_total",
        )
    ttft_sum, ttft_count = _histogram(series, TTFT)
    tpot_sum, tpot_count = _histogram(series, TPOT)
    row: dict[str, Any] = {
        "time": time,
        "replica": replica,
        "accelerator": kind,
        "model": model,
        "tp": tp,
        "num_requests_running": round(series.total(RUNNING)),
        "num_requests_waiting": round(series.total(WAITING)),
        "kv_cache_usage_perc": series.mean(KV_USAGE),
        "prompt_tokens_total": round(series.total(PROMPT_TOKENS)),
        "generation_tokens_total": round(series.total(GENERATION_TOKENS)),
        "prefix_cache_hit_tokens_total": round(hits),
        "ttft_seconds_sum": ttft_sum,
        "ttft_seconds_count": ttft_count,
        "tpot_seconds_sum": tpot_sum,
        "tpot_seconds_count": tpot_count,
    }
    _check_row(row, source)
    return row


def _check_row(row: dict[str, Any], source: str) -> None:
    """The row must pass the replica_samples validation, like any stored sample."""
    if row["time"].tzinfo is None:
        raise InputError("sample time has no time zone", source=source, field="time")
    try:
        validate_sample_row(row)
    except InputError as exc:
        raise InputError(str(exc), source=source) from None


def _utc_now() -> datetime:
    return datetime.now(UTC)


def fetch_metrics(url: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> str:
    """The text of ``url`` (http or https), or ScrapeFailed saying why not."""
    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        raise InputError(
            f"'{url}' is not an http(s) URL", field="url", expected="http://host:port/metrics"
        )
    if not timeout_s > 0:
        raise InputError(f"timeout {timeout_s} s", field="timeout_s", expected="> 0 seconds")
    request = urllib.request.Request(url, headers={"Accept": ACCEPT})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            status = response.status
            body: bytes = response.read()
    except urllib.error.HTTPError as exc:
        raise ScrapeFailed(f"{url} answered HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        raise ScrapeFailed(f"cannot reach {url}: {exc.reason}") from None
    except (TimeoutError, OSError) as exc:
        raise ScrapeFailed(f"cannot reach {url}: {exc}") from None
    if status != 200:
        raise ScrapeFailed(f"{url} answered HTTP {status}, expected 200")
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        raise ScrapeFailed(f"{url} did not answer UTF-8 text") from None


def scrape(
    url: str,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    *,
    replica: str,
    accelerator: str,
    model: str,
    tp: int,
    model_name: str | None = None,
    clock: Callable[[], datetime] = _utc_now,
) -> dict[str, Any]:
    """Fetch one replica's ``/metrics`` and parse it into a ``replica_samples`` row, stamped
    with ``clock()`` when the answer arrived. Raises ScrapeFailed on a connection failure, a
    timeout, a non-200 answer or text that is not vLLM's Prometheus exposition; an unknown
    accelerator is the caller's mistake and raises UnknownAccelerator before any fetch."""
    get_accelerator(accelerator, field="accelerator")
    text = fetch_metrics(url, timeout_s)
    return read_page(
        text,
        url,
        replica=replica,
        accelerator=accelerator,
        model=model,
        tp=tp,
        model_name=model_name,
        clock=clock,
    )


def read_page(
    text: str,
    url: str,
    *,
    replica: str,
    accelerator: str,
    model: str,
    tp: int,
    model_name: str | None = None,
    clock: Callable[[], datetime] = _utc_now,
) -> dict[str, Any]:
    """The ``replica_samples`` row of a page fetched from ``url``, stamped with ``clock()``;
    ScrapeFailed naming ``url`` when the page is not vLLM's Prometheus exposition."""
    try:
        return parse_vllm_metrics(
            text,
            replica=replica,
            accelerator=accelerator,
            model=model,
            tp=tp,
            time=clock(),
            model_name=model_name,
            source=url,
        )
    except InputError as exc:
        raise ScrapeFailed(str(exc)) from None
