"""The gateway mode's settings: one pydantic-settings class read from ``PLACEMENT_GATEWAY_*``.

Kept apart from the service's :class:`~serving.api.settings.Settings` so that turning the
gateway on changes nothing else; ``placement serve --proxy`` sets ``enabled``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from placement.errors import InputError

DEFAULT_TENANT_HEADER = "x-gateway-inference-fairness-id"
DEFAULT_RESULT_CACHE_BYTES = 64 << 20


class GatewaySettings(BaseSettings):
    """How the OpenAI-compatible gateway forwards, retries, caches and records."""

    model_config = SettingsConfigDict(env_prefix="PLACEMENT_GATEWAY_", extra="forbid", frozen=True)

    enabled: bool = False
    # a key that is not tenant-scoped routes for the tenant this header names (else its name)
    tenant_header: str = DEFAULT_TENANT_HEADER
    default_request_class: str = "interactive"
    # retries: at most max_attempts tries per request (the decision's replica, then its
    # fallbacks), and fleet-wide no more retries than retry_ratio × requests + retry_min_per_s
    max_attempts: int = Field(default=3, ge=1, le=10)
    retry_ratio: float = Field(default=0.2, ge=0, le=10)
    retry_min_per_s: float = Field(default=5.0, ge=0)
    connect_timeout_s: float = Field(default=1.0, gt=0)
    read_timeout_s: float = Field(default=600.0, gt=0)  # between two bytes of an answer
    max_connections: int = Field(default=1024, ge=1)
    # deterministic answers (temperature 0) kept in memory, LRU, up to this many bytes (0: off)
    result_cache_bytes: int = Field(default=DEFAULT_RESULT_CACHE_BYTES, ge=0)
    # per-request outcomes appended to this Parquet telemetry store (None: not written)
    telemetry_dir: Path | None = None
    telemetry_flush_s: float = Field(default=5.0, gt=0)
    telemetry_flush_rows: int = Field(default=5000, ge=1)
    # flow control: a request admission cannot place now waits in a queue, up to this many
    # requests (0: refused at once, as without a queue), until its TTFT deadline
    # (arrival + SLO × deadline slack) can no longer be met
    queue_max: int = Field(default=4096, ge=0)
    queue_order: Literal["fair", "edf", "fifo", "sjf", "lifo"] = "fair"
    queue_deadline_slack: float = Field(default=1.0, gt=0, le=100)
    queue_tenant_floor: float = Field(default=0.05, ge=0, le=1)
    # below the top band, dispatch only when forecast to take this share of the time left
    queue_band_headroom: float = Field(default=1.0, gt=0, le=1)
    # when a band's next request cannot be placed, this many behind it are tried (0: none)
    queue_backfill: int = Field(default=0, ge=0, le=1024)
    # the prefill rate the queue assumes to tell when a waiting request's first token is due
    queue_prefill_tokens_per_s: float = Field(default=20000.0, gt=0)
    # dynamic batching of POST /v1/embeddings: requests for the same replica and model go as one
    # request of up to embed_batch_max inputs (0: each alone) while embed_batch_in_flight of
    # its batches are out; none waits past min(embed_batch_max_wait_s, embed_batch_wait_share
    # × its SLO) for others to join it
    embed_batch_max: int = Field(default=64, ge=0, le=2048)
    embed_batch_wait_share: float = Field(default=0.25, ge=0, le=1)
    embed_batch_max_wait_s: float = Field(default=0.5, ge=0, le=60)
    embed_batch_in_flight: int = Field(default=1, ge=1, le=1024)
    # the Batch API (/v1/files, /v1/batches): its files and jobs kept in this folder (None: off)
    batch_dir: Path | None = None
    batch_max_file_bytes: int = Field(default=200 << 20, ge=1)
    # batch work starts only while the fleet's in-flight requests are under this share of its
    # budget and batch holds under batch_share of it (and nothing waits in the queue)
    batch_busy_fraction: float = Field(default=0.6, gt=0, le=1)
    batch_share: float = Field(default=0.5, gt=0, le=1)
    # … and only once no request has had to wait or been refused for this long
    batch_calm_s: float = Field(default=10.0, ge=0)


def load_gateway_settings(**overrides: object) -> GatewaySettings:
    """Gateway settings from the environment with ``overrides`` (CLI flags) on top; a bad value
    is an :class:`InputError` naming the variable."""
    try:
        return GatewaySettings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise InputError(err["msg"], field=f"PLACEMENT_GATEWAY_{loc.upper()}") from None
