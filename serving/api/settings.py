"""The service's settings: one pydantic-settings class read from ``PLACEMENT_*`` variables.

Outside ``development`` the class refuses what is only safe on a laptop: no API keys, the
generated development key, keys given in clear rather than hashed, a wildcard bind without
keys. API keys are stored as ``sha256:<hex>`` digests (``placement serve --hash-key`` prints
one), in ``PLACEMENT_API_KEYS`` (a JSON list) or in a JSON keys file. With
``PLACEMENT_METRICS_AUTH`` set, ``/metrics`` too needs a key (scope ``metrics`` or ``admin``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from placement.errors import InputError, read_text
from serving.admission.share_cap import DEFAULT_SHARE_WINDOW_S
from serving.admission.slo_gate import (
    DEFAULT_OVERLOAD_REFUSE_AT,
    DEFAULT_REFUSE_AT,
    DEFAULT_TPOT_HEADROOM,
)
from serving.leases import DEFAULT_LEASE_CEILING_S, DEFAULT_LEASE_FLOOR_S, DEFAULT_LEASE_MARGIN

Scope = Literal["route", "telemetry", "admin", "metrics"]
SCOPES: tuple[Scope, ...] = ("route", "telemetry", "admin", "metrics")

DEFAULT_MAX_BODY_BYTES = 1 << 20  # a 1 MiB prompt is far longer than any context window
DEFAULT_TEXT_BLOCK_CHARS = 2048  # ~512 tokens of English, the simulator's block size
DEFAULT_SCRAPE_INTERVAL_S = 1.0
DEFAULT_SOLVE_PERIOD_S = 60.0
DEFAULT_SOLVE_TIME_LIMIT_S = 10.0


class ApiKey(BaseModel):
    """One API key: its digest, its scopes and, for a tenant-scoped key, the one tenant."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    digest: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    scopes: tuple[Scope, ...] = Field(min_length=1)
    tenant: str | None = None


class Settings(BaseSettings):
    """Everything ``placement serve`` can be told, from flags or ``PLACEMENT_*`` variables."""

    model_config = SettingsConfigDict(env_prefix="PLACEMENT_", extra="forbid", frozen=True)

    environment: Literal["development", "production"] = "production"
    api_keys: tuple[ApiKey, ...] = ()
    api_keys_file: Path | None = None
    # set only in development, when no key was configured: printed once at startup
    dev_key: str | None = None
    # /metrics answers only a key with the ``metrics`` or ``admin`` scope (else anyone)
    metrics_auth: bool = False

    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    max_body_bytes: int = Field(default=DEFAULT_MAX_BODY_BYTES, ge=1024)
    text_block_chars: int = Field(default=DEFAULT_TEXT_BLOCK_CHARS, ge=16)

    fleet: Path | None = None
    # declared tenants and their credit shares (placement/domain/tenancy.py)
    tenants_file: Path | None = None
    # tenants the file does not declare: admitted as newcomers (a small floor of the fleet, no
    # credit) or refused with 422
    unknown_tenants: Literal["admit", "reject"] = "admit"
    profile: Path | None = None
    plan_dir: Path = Path("plans")
    redis_url: str | None = None
    # with Redis: how often each process exchanges its state with the others, and how long
    # another process's state counts after its last exchange (serving/shared/sync.py)
    shared_interval_s: float = Field(default=0.25, gt=0, le=60)
    shared_ttl_s: float = Field(default=3.0, gt=0, le=600)
    # request outcomes reported to POST /v1/outcomes appended to this Parquet telemetry store
    telemetry_dir: Path | None = None
    no_plan_fallback: bool = False  # ready without a plan, routing greedily

    scrape_interval_s: float = Field(default=DEFAULT_SCRAPE_INTERVAL_S, gt=0)
    solve_period_s: float = Field(default=DEFAULT_SOLVE_PERIOD_S, gt=0)
    solve_time_limit_s: float = Field(default=DEFAULT_SOLVE_TIME_LIMIT_S, gt=0)
    # an unreported request's lease: lease_margin × its predicted completion time, at least
    # lease_floor_s and at most lease_s (serving/leases.py)
    lease_s: float = Field(default=DEFAULT_LEASE_CEILING_S, gt=0)
    lease_margin: float = Field(default=DEFAULT_LEASE_MARGIN, ge=1)
    lease_floor_s: float = Field(default=DEFAULT_LEASE_FLOOR_S, ge=0)
    # admission by predicted TTFT (serving/admission/slo_gate.py): refuse with 429 a request
    # whose predicted TTFT on its chosen replica exceeds its class SLO × headroom, or whose
    # replica's observed TPOT exceeds the class's TPOT SLO × tpot headroom (unless another
    # replica meets both)
    slo_gate: bool = False
    slo_gate_headroom: float = Field(default=1.0, gt=0)
    slo_gate_tpot_headroom: float = Field(default=DEFAULT_TPOT_HEADROOM, gt=0)
    # past capacity (the share of SLO refusals past its floor) the gate refuses at this chance
    # of a miss; with a strict threshold, lower still as far as refusals led by the first token
    # say the queues overflow; with a cold-move share, its second look does not load a cached
    # prefix cold on a replica without that share of the TTFT SLO to spare; by work, its TPOT
    # forecast counts prompt tokens to compute and learns each replica's TPOT ratio (the
    # settings ``placement bench loop`` tunes on a trace's head: its summary's gate_* fields)
    slo_gate_overload_refuse_at: float = Field(
        default=DEFAULT_OVERLOAD_REFUSE_AT, gt=0, le=DEFAULT_REFUSE_AT
    )
    slo_gate_strict_refuse_at: float | None = Field(default=None, gt=0, le=DEFAULT_REFUSE_AT)
    slo_gate_cold_move_ttft_share: float | None = Field(default=None, gt=0)
    slo_gate_tpot_by_work: bool = False
    # the TPOT forecast counts the prompt tokens a replica computes (its cached prefix left
    # out) at the kind's prefill rate, without by work's learned costs (see the gate)
    slo_gate_tpot_computed: bool = False
    # below this share of SLO refusals the TPOT rule refuses only at the gate's own threshold
    # (0.9); up to 3× it, it comes to shed as the TTFT rule does (None: it always does)
    slo_gate_tpot_shed_from: float | None = Field(default=None, gt=0, lt=1)
    # the share of SLO refusals (the overload signal) kept per model pool: a request is judged
    # by its model's (False: one signal for the whole fleet; see the gate for why it is off)
    slo_gate_pressure_by_model: bool = False
    # past capacity, a tenant is judged against its TTFT SLO shortened by this share × its
    # standing among the active tenants (0 the most owed, 1 the furthest over its share), so
    # that it queues only where those owed have room (0: off)
    slo_gate_credit_reserve: float = Field(default=0.0, ge=0, lt=1)
    # past capacity, a tenant served more than this many times its credit-weighted max-min
    # entitlement in its model's pool over the last ``slo_gate_share_window_s`` is refused
    # (429, Retry-After: until its recent service is back under the cap); unset: no cap
    # (serving/admission/share_cap.py)
    slo_gate_share_cap: float | None = Field(default=None, ge=1)
    slo_gate_share_window_s: float = Field(default=DEFAULT_SHARE_WINDOW_S, gt=0)
    # with the share cap, a running LoRA adapter of a tenant at its share yields its slot to a
    # tenant below its share that has waited this many seconds for one (its requests refused
    # for credit until it drains; serving/admission/slo_gate.py, "Slot turns"); unset: never
    slo_gate_slot_turn_s: float | None = Field(default=None, gt=0)
    # the replicas run vLLM's --scheduling-policy priority: every request is sent with a
    # ``priority`` by its class ("class") or by class and its tenant's credit standing
    # ("credit"; serving/admission/engine_priority.py); unset: FCFS replicas, bodies untouched
    engine_priority: Literal["class", "credit"] | None = None
    # OpenTelemetry: a span per decision sent by OTLP/HTTP to this collector (base URL, e.g.
    # http://127.0.0.1:4318); unset: OTEL_EXPORTER_OTLP_ENDPOINT if set, else no tracing
    otlp_endpoint: str | None = Field(default=None, pattern=r"^https?://\S+$")
    planner: bool = True  # run the planner loop in this process (else only follow the store)
    # how often the registry's @champion is read; a new version → re-solve with it
    champion_poll_s: float = Field(default=5.0, gt=0, le=3600)
    # retraining on a schedule (serving/retraining.py), from the telemetry store: every N hours
    # and/or every N new request records; the candidate learns from the last window_hours
    retrain_every_hours: float | None = Field(default=None, gt=0)
    retrain_every_records: int | None = Field(default=None, ge=1)
    retrain_window_hours: float = Field(default=24.0, gt=0)
    retrain_experiment: str = Field(default="placement-predictors", min_length=1)

    @model_validator(mode="after")
    def _strict_below_overload(self) -> Settings:
        strict = self.slo_gate_strict_refuse_at
        if strict is not None and strict > self.slo_gate_overload_refuse_at:
            raise ValueError(
                f"PLACEMENT_SLO_GATE_STRICT_REFUSE_AT ({strict}) must not exceed "
                f"PLACEMENT_SLO_GATE_OVERLOAD_REFUSE_AT ({self.slo_gate_overload_refuse_at}): "
                "the strict regime refuses at a lower chance of a miss"
            )
        return self

    @model_validator(mode="after")
    def _slot_turns_need_a_share_cap(self) -> Settings:
        if self.slo_gate_slot_turn_s is not None and self.slo_gate_share_cap is None:
            raise ValueError(
                "PLACEMENT_SLO_GATE_SLOT_TURN_S reads each tenant's standing in the share cap: "
                "set PLACEMENT_SLO_GATE_SHARE_CAP too"
            )
        return self

    @model_validator(mode="after")
    def _retrain_needs_telemetry(self) -> Settings:
        scheduled = self.retrain_every_hours is not None or self.retrain_every_records is not None
        if scheduled and self.telemetry_dir is None:
            raise ValueError(
                "retraining on a schedule learns from the telemetry store: set "
                "PLACEMENT_TELEMETRY_DIR"
            )
        return self

    @model_validator(mode="after")
    def _refuse_unsafe(self) -> Settings:
        if self.environment == "development":
            return self
        if self.dev_key is not None:
            raise ValueError("a generated development key is refused outside development")
        if not self.api_keys and self.api_keys_file is None:
            raise ValueError(
                "no API keys: set PLACEMENT_API_KEYS or PLACEMENT_API_KEYS_FILE "
                "(or PLACEMENT_ENVIRONMENT=development for a generated key)"
            )
        return self

    def all_keys(self) -> tuple[ApiKey, ...]:
        """The configured keys plus those of the keys file."""
        keys = list(self.api_keys)
        if self.api_keys_file is not None:
            keys.extend(load_keys_file(self.api_keys_file))
        return tuple(keys)


def load_keys_file(path: Path) -> list[ApiKey]:
    """A JSON list of keys (``name``, ``digest``, ``scopes``, optional ``tenant``)."""
    text = read_text(path, "keys file")
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"not JSON: {exc.msg}", source=str(path), line=exc.lineno) from None
    if not isinstance(raw, list):
        raise InputError("a keys file is a JSON list", source=str(path), expected="[{...}, ...]")
    keys = []
    for i, item in enumerate(raw):
        try:
            keys.append(ApiKey.model_validate(item))
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(p) for p in (i, *err["loc"]))
            raise InputError(err["msg"], source=str(path), field=loc) from None
    return keys


def load_settings(**overrides: object) -> Settings:
    """Settings from the environment with ``overrides`` (CLI flags) on top; an unsafe or
    malformed setting is an :class:`InputError` naming the variable."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        field = f"PLACEMENT_{loc.upper()}" if loc else "settings"
        raise InputError(err["msg"].removeprefix("Value error, "), field=field) from None
