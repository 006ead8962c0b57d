"""What a peer policy is built from: a seed, the prefix block size, and per-policy settings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from placement.domain.requests import DEFAULT_CLASSES, RequestClass
from placement.errors import InputError
from placement.plan import Plan
from placement.routing.policies.chbl import ChblConfig
from placement.routing.policies.dynamo import DynamoConfig
from placement.routing.policies.llm_d import LlmdConfig
from placement.routing.policies.preble_e2 import PrebleConfig
from placement.routing.policies.sglang_cache_aware import SglangConfig

DEFAULT_BLOCK_TOKENS = 512  # the Mooncake trace's prefix block size


@dataclass(frozen=True, slots=True, kw_only=True)
class GateSettings:
    """The ``placement`` policy's admission gate (:class:`serving.admission.slo_gate.SloGate`)."""

    headroom: float = 1.0
    credit_cut: float = 0.5
    shed_factor: float = 0.5


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyContext:
    """Inputs shared by the policy factories.

    ``seed`` makes every random choice reproducible; ``block_tokens`` is the size in tokens of
    one prefix block (the unit of ``Request.block_hashes``, and of the per-replica prefix
    indexes, whose capacity is a replica's KV capacity over it). The per-policy settings
    default to each peer's published defaults; a factory reads only its own.
    """

    seed: int
    block_tokens: int = DEFAULT_BLOCK_TOKENS
    chbl: ChblConfig = field(default_factory=ChblConfig)
    sglang: SglangConfig = field(default_factory=SglangConfig)
    llm_d: LlmdConfig = field(default_factory=LlmdConfig)
    dynamo: DynamoConfig = field(default_factory=DynamoConfig)
    preble: PrebleConfig = field(default_factory=PrebleConfig)
    # the ``placement`` policy's inputs: a solved plan (None: its no-plan fallback) and a
    # route profile YAML (None: data/profiles/default.yaml)
    plan: Plan | None = None
    route_profile: Path | None = None
    # admission before routing (None: every request is routed), the classes it judges by and
    # the tenants' credit shares it starts from (a plan's guaranteed shares replace them)
    slo_gate: GateSettings | None = None
    classes: Mapping[str, RequestClass] = field(default_factory=lambda: dict(DEFAULT_CLASSES))
    credits: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.block_tokens < 1:
            raise InputError(
                f"got {self.block_tokens}", field="block_tokens", expected="an integer >= 1"
            )
