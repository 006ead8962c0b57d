"""Scraping vLLM's /metrics: parsing recorded text, and fetching it from a real HTTP server."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from placement.errors import InputError, ScrapeFailed, UnknownAccelerator
from serving.scrape import parse_vllm_metrics, scrape
from training.telemetry.schema import REPLICA_SAMPLES_SCHEMA

SAMPLE = Path(__file__).resolve().parents[2] / "data/samples/vllm_metrics.txt"
NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
REPLICA = {"replica": "h100-0", "accelerator": "H100-SXM", "model": "llama-3.1-8b", "tp": 1}
_ROW_FOR_RULES = {
    "time": NOW,
    **REPLICA,
    "num_requests_running": 3,
    "num_requests_waiting": 0,
    "kv_cache_usage_perc": 0.5,
    "prompt_tokens_total": 100,
    "generation_tokens_total": 50,
    "prefix_cache_hit_tokens_total": 10,
    "ttft_seconds_sum": 1.0,
    "ttft_seconds_count": 4,
    "tpot_seconds_sum": 0.5,
    "tpot_seconds_count": 40,
}


@pytest.fixture(scope="module")
def text() -> str:
    return SAMPLE.read_text()


def parse(text: str, **kw):
    return parse_vllm_metrics(text, **{**REPLICA, "time": NOW, **kw})


def test_the_recorded_sample_parses_into_a_full_row(text):
    row = parse(text)
    assert set(row) == set(REPLICA_SAMPLES_SCHEMA.names)
    # the figures in data/samples/vllm_metrics.txt
    assert row["num_requests_running"] == 12 and row["num_requests_waiting"] == 3
    assert row["kv_cache_usage_perc"] == 0.4375
    assert row["prompt_tokens_total"] == 1_843_200
    assert row["generation_tokens_total"] == 5900
    assert row["prefix_cache_hit_tokens_total"] == 921_600
    assert row["ttft_seconds_count"] == 900 and row["ttft_seconds_sum"] == pytest.approx(186.7935)
    assert row["tpot_seconds_count"] == 5000 and row["tpot_seconds_sum"] == pytest.approx(130.7305)
    assert row["time"] == NOW and row["replica"] == "h100-0"


def test_older_names_are_accepted_when_the_new_ones_are_absent(text):
    old = "\n".join(
        line
        for line in text.replace("vllm:prefix_cache_", "vllm:gpu_prefix_cache_").splitlines()
        if "kv_cache_usage_perc" not in line and "inter_token_latency" not in line
    )
    old = old.replace("0.4375", "0.5")  # only the deprecated gauge is left to read
    row = parse(old + "\n")
    assert row["kv_cache_usage_perc"] == 0.5
    assert row["prefix_cache_hit_tokens_total"] == 921_600
    assert row["tpot_seconds_count"] == 5000  # from vllm:time_per_output_token_seconds


def engine(text: str, index: str) -> str:
    return text.replace('engine="0"', f'engine="{index}"')


def two_engines(text: str) -> str:
    """The sample's series for engine 0, and again for engine 1 (data parallel)."""
    second = "\n".join(line for line in engine(text, "1").splitlines() if not line.startswith("#"))
    return text + second + "\n"


def test_engines_of_one_model_are_summed_but_kv_usage_is_averaged(text):
    row = parse(two_engines(text))
    assert row["num_requests_running"] == 24
    assert row["prompt_tokens_total"] == 2 * 1_843_200
    assert row["ttft_seconds_count"] == 1800
    assert row["kv_cache_usage_perc"] == 0.4375


def test_several_served_models_need_a_model_name(text):
    other = "\n".join(
        line.replace("meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen2.5-7B").replace("12.0", "2.0")
        for line in text.splitlines()
        if not line.startswith("#")
    )
    both = text + other + "\n"
    with pytest.raises(InputError, match="several served models"):
        parse(both)
    assert parse(both, model_name="Qwen/Qwen2.5-7B")["num_requests_running"] == 2
    assert parse(both, model_name="meta-llama/Llama-3.1-8B-Instruct")["num_requests_running"] == 12


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("<html><body>Not Found</body></html>\n", "not Prometheus text exposition"),
        ("# TYPE up gauge\nup 1.0\n", "no vllm: metrics"),
        (
            'vllm:num_requests_running{model_name="m"} 1.0\n',
            "missing vllm:num_requests_waiting; vllm:kv_cache_usage_perc or",
        ),
    ],
)
def test_text_that_is_not_vllm_metrics_is_refused(bad, message):
    with pytest.raises(InputError, match=message):
        parse(bad)


def test_values_the_schema_refuses_are_refused(text):
    with pytest.raises(InputError, match="kv_cache_usage_perc"):
        parse(text.replace("} 0.4375", "} 1.75"))


def test_accelerator_aliases_are_stored_as_the_catalogue_kind(text):
    assert parse(text, accelerator="h100")["accelerator"] == "H100-SXM"
    with pytest.raises(UnknownAccelerator):
        parse(text, accelerator="Z9000")


# --- a real HTTP server on 127.0.0.1 -------------------------------------------------------


class _Metrics(BaseHTTPRequestHandler):
    body = b""

    def do_GET(self) -> None:
        if self.path == "/metrics":
            self._answer(200, self.body)
        elif self.path == "/broken":
            self._answer(500, b"internal error")
        elif self.path == "/html":
            self._answer(200, b"<html><body>hello</body></html>")
        else:
            self._answer(404, b"not found")

    def _answer(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass  # keep test output quiet


@pytest.fixture(scope="module")
def server(text) -> Iterator[str]:
    handler = type("Handler", (_Metrics,), {"body": text.encode()})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def test_scrape_reads_a_live_endpoint(server):
    row = scrape(f"{server}/metrics", 2.0, **REPLICA, clock=lambda: NOW)
    assert row["num_requests_running"] == 12 and row["time"] == NOW


def test_a_500_answer_is_a_scrape_failure(server):
    with pytest.raises(ScrapeFailed, match="HTTP 500"):
        scrape(f"{server}/broken", 2.0, **REPLICA)


def test_a_page_that_is_not_metrics_is_a_scrape_failure(server):
    with pytest.raises(ScrapeFailed, match="not Prometheus text exposition"):
        scrape(f"{server}/html", 2.0, **REPLICA)


def test_a_closed_port_is_a_scrape_failure():
    with socket.socket() as s:  # a port that was free a moment ago and is closed now
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ScrapeFailed, match="cannot reach"):
        scrape(f"http://127.0.0.1:{port}/metrics", 1.0, **REPLICA)


def test_only_http_urls_are_fetched():
    with pytest.raises(InputError, match="http"):
        scrape("file:///etc/passwd", 1.0, **REPLICA)


def test_scraped_rows_go_to_the_store_like_any_sample(server, tmp_path):
    from training.telemetry import SAMPLE_COLUMNS, frame_from_rows, read_samples, write_telemetry

    rows = [
        scrape(f"{server}/metrics", 2.0, **{**REPLICA, "replica": r}, clock=lambda: NOW)
        for r in ("h100-0", "h100-1")
    ]
    frame = frame_from_rows(rows, SAMPLE_COLUMNS)
    write_telemetry(tmp_path, None, frame)
    stored = read_samples(tmp_path)
    assert list(stored["replica"]) == ["h100-0", "h100-1"]
    assert (stored["kv_cache_usage_perc"] == 0.4375).all()


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({}, None),
        ({"kv_cache_usage_perc": 1.5}, "kv_cache_usage_perc"),
        ({"num_requests_waiting": -1}, "num_requests_waiting"),
        ({"tp": 0}, "tp"),
        ({"accelerator": "Z999"}, "accelerator"),
    ],
)
def test_the_row_check_refuses_what_the_table_check_refuses(
    changes: dict[str, object], field: str | None
) -> None:
    from training.telemetry.schema import SAMPLE_COLUMNS, frame_from_rows
    from training.telemetry.validate import validate_sample_row, validate_samples

    row = dict(_ROW_FOR_RULES)
    row.update(changes)
    outcomes = []
    for check in (
        lambda: validate_sample_row(row),
        lambda: validate_samples(frame_from_rows([row], SAMPLE_COLUMNS)),
    ):
        try:
            check()
            outcomes.append(None)
        except InputError as exc:
            outcomes.append(exc.field)
    assert outcomes[0] == field
    assert (outcomes[1] is None) == (field is None)
