"""Fleets: replicas of one or more kinds, loaded from YAML.

```yaml
name: hetero
replicas:
  - kind: h100            # a name for this group of identical replicas
    accelerator: H100-SXM
    count: 4
    model: llama-3-8b
    tp: 1
    cost_per_hour: 4.0    # optional, per accelerator; the catalogue's figure otherwise
    max_loras: 8          # optional: LoRA adapter GPU slots (vLLM --max-loras; 0: none)
    max_lora_rank: 64     # optional: the largest adapter rank a slot holds
    lora_load_gbps: 2.0   # optional: GB/s an adapter loads at (placement.domain.adapters)
    models: [llama-3-8b, qwen2-7b]  # optional: base models a replica may swap to at run time
    weights_load_gbps: 3.0  # optional: GB/s the weights load at on a swap
    startup_s: 25.0       # optional: engine start-up after the weights (profiling, graphs)
```
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from placement.domain.accelerators import Accelerator, get_accelerator
from placement.domain.adapters import DEFAULT_LORA_LOAD_GBPS, DEFAULT_MAX_LORA_RANK, lora_bytes
from placement.domain.base_models import DEFAULT_STARTUP_S, DEFAULT_WEIGHTS_LOAD_GBPS
from placement.domain.llm import ModelArchitecture, get_model
from placement.errors import InputError, read_text

# vLLM v0's chunked-prefill default; latency-oriented (an 8192-token chunk of an 8B model
# alone takes ~0.2 s on an H100, twice the interactive TPOT SLO)
DEFAULT_MAX_BATCHED_TOKENS = 2048
DEFAULT_MAX_NUM_SEQS = 256
DEFAULT_GPU_MEMORY_UTILIZATION = 0.9
# activations, CUDA graphs and the like, per GPU, before the KV cache gets the rest
ACTIVATION_RESERVE_GB = 2.0
# the least KV cache a replica must keep once its weights are loaded (a model that leaves
# less does not fit the replica)
MIN_KV_TOKENS = 16 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaSpec:
    """One engine instance: a model on ``tp`` accelerators of one kind."""

    id: str
    kind: str
    accelerator: Accelerator
    model: ModelArchitecture
    tp: int
    cost_per_hour: float
    max_num_batched_tokens: int
    max_num_seqs: int
    kv_capacity_tokens: int
    labels: dict[str, str] = field(default_factory=dict)
    # LoRA (vLLM --max-loras / --max-lora-rank): adapter GPU slots (0: no adapters served)
    max_loras: int = 0
    max_lora_rank: int = DEFAULT_MAX_LORA_RANK
    lora_load_gbps: float = DEFAULT_LORA_LOAD_GBPS
    # base models this replica may be swapped to at run time (the plan's choice; empty: it
    # keeps ``model``), what a swap costs (placement.domain.base_models), and the share of
    # its GPUs' memory the engine takes (its KV capacity is recomputed on a swap)
    models: tuple[str, ...] = ()
    weights_load_gbps: float = DEFAULT_WEIGHTS_LOAD_GBPS
    startup_s: float = DEFAULT_STARTUP_S
    gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION


@dataclass(frozen=True, slots=True, kw_only=True)
class Fleet:
    name: str
    replicas: tuple[ReplicaSpec, ...]

    @property
    def cost_per_hour(self) -> float:
        return sum(r.cost_per_hour for r in self.replicas)

    @property
    def models(self) -> set[str]:
        return {r.model.name for r in self.replicas}


def kv_capacity_tokens(
    accelerator: Accelerator,
    model: ModelArchitecture,
    tp: int,
    gpu_memory_utilization: float,
    *,
    lora_slot_bytes: float = 0.0,
) -> int:
    """Tokens of KV cache a replica holds once weights, LoRA slots and a reserve are loaded."""
    usable = accelerator.hbm_gb * 1e9 * gpu_memory_utilization * tp
    free = usable - model.weight_bytes() - lora_slot_bytes - ACTIVATION_RESERVE_GB * 1e9 * tp
    return max(0, int(free // model.kv_bytes_per_token()))


class _GroupSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: str
    accelerator: str
    count: int = Field(ge=1, le=100_000)
    model: str
    tp: int = Field(default=1, ge=1, le=64)
    cost_per_hour: float | None = Field(default=None, ge=0)
    max_num_batched_tokens: int = Field(default=DEFAULT_MAX_BATCHED_TOKENS, ge=64)
    max_num_seqs: int = Field(default=DEFAULT_MAX_NUM_SEQS, ge=1)
    gpu_memory_utilization: float = Field(default=DEFAULT_GPU_MEMORY_UTILIZATION, gt=0, le=1)
    labels: dict[str, str] = Field(default_factory=dict)
    max_loras: int = Field(default=0, ge=0, le=1024)
    max_lora_rank: int = Field(default=DEFAULT_MAX_LORA_RANK, ge=1, le=1024)
    lora_load_gbps: float = Field(default=DEFAULT_LORA_LOAD_GBPS, gt=0)
    models: list[str] = Field(default_factory=list)
    weights_load_gbps: float = Field(default=DEFAULT_WEIGHTS_LOAD_GBPS, gt=0)
    startup_s: float = Field(default=DEFAULT_STARTUP_S, ge=0)


class _FleetSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    replicas: list[_GroupSpec] = Field(min_length=1)


def _pydantic_to_input_error(exc: ValidationError, source: str) -> InputError:
    errors = exc.errors()
    # a typo shows up twice (an unknown key and a missing one): name the typo first
    err = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    loc = ".".join(str(p) for p in err["loc"])
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        msg = "unknown field (a typo?)"
    return InputError(msg, source=source, field=loc)


def fleet_from_dict(raw: Any, *, source: str = "<fleet>") -> Fleet:
    """Build and validate a fleet from parsed YAML."""
    if not isinstance(raw, dict):
        raise InputError(
            "a fleet must be a mapping", source=source, expected="keys 'name' and 'replicas'"
        )
    try:
        spec = _FleetSpec.model_validate(raw)
    except ValidationError as exc:
        raise _pydantic_to_input_error(exc, source) from None
    replicas: list[ReplicaSpec] = []
    for gi, g in enumerate(spec.replicas):
        where = f"replicas.{gi}"
        acc = get_accelerator(g.accelerator, source=source, field=f"{where}.accelerator")
        model = get_model(g.model, source=source, field=f"{where}.model")
        kv = _fitting_kv(
            g,
            acc,
            model,
            source=source,
            field=f"{where}.tp",
            expected="more GPUs (tp) or a smaller model",
        )
        models = _candidate_models(g, acc, model, source=source, where=where)
        cost = g.cost_per_hour if g.cost_per_hour is not None else acc.cost_per_hour
        for i in range(g.count):
            replicas.append(
                ReplicaSpec(
                    id=f"{g.kind}-{i}",
                    kind=g.kind,
                    accelerator=acc,
                    model=model,
                    tp=g.tp,
                    cost_per_hour=cost * g.tp,
                    max_num_batched_tokens=g.max_num_batched_tokens,
                    max_num_seqs=g.max_num_seqs,
                    kv_capacity_tokens=kv,
                    labels=dict(g.labels),
                    max_loras=g.max_loras,
                    max_lora_rank=g.max_lora_rank,
                    lora_load_gbps=g.lora_load_gbps,
                    models=models,
                    weights_load_gbps=g.weights_load_gbps,
                    startup_s=g.startup_s,
                    gpu_memory_utilization=g.gpu_memory_utilization,
                )
            )
    ids = [r.id for r in replicas]
    if len(set(ids)) != len(ids):
        raise InputError(
            "two replica groups share a kind",
            source=source,
            field="replicas.kind",
            expected="distinct kinds",
        )
    return Fleet(name=spec.name, replicas=tuple(replicas))


def _candidate_models(
    g: _GroupSpec, acc: Accelerator, model: ModelArchitecture, *, source: str, where: str
) -> tuple[str, ...]:
    """The group's swappable base models (its own first), each checked to fit its GPUs."""
    if not g.models:
        return ()
    names: list[str] = [model.name]
    for j, name in enumerate(g.models):
        other = get_model(name, source=source, field=f"{where}.models.{j}")
        if other.name in names:
            continue
        _fitting_kv(
            g,
            acc,
            other,
            source=source,
            field=f"{where}.models.{j}",
            expected="base models whose weights fit the group's GPUs",
        )
        names.append(other.name)
    return tuple(names) if len(names) > 1 else ()


def kv_with_lora_slots(
    acc: Accelerator,
    model: ModelArchitecture,
    tp: int,
    gpu_memory_utilization: float,
    max_loras: int,
    max_lora_rank: int,
) -> int:
    """KV tokens left on a replica once its weights and its LoRA slots are placed (vLLM
    reserves every slot at the largest rank up front)."""
    slots = max_loras * lora_bytes(model, max_lora_rank)
    return kv_capacity_tokens(acc, model, tp, gpu_memory_utilization, lora_slot_bytes=slots)


def _fitting_kv(
    g: _GroupSpec,
    acc: Accelerator,
    model: ModelArchitecture,
    *,
    source: str,
    field: str,
    expected: str,
) -> int:
    """The group's KV tokens holding ``model``; an error naming ``field`` if under
    :data:`MIN_KV_TOKENS`."""
    kv = kv_with_lora_slots(
        acc, model, g.tp, g.gpu_memory_utilization, g.max_loras, g.max_lora_rank
    )
    if kv < MIN_KV_TOKENS:
        raise InputError(
            f"{model.name} on {g.tp}×{acc.kind} leaves {kv} tokens of KV cache",
            source=source,
            field=field,
            expected=expected,
        )
    return kv


def with_model(spec: ReplicaSpec, model: ModelArchitecture) -> ReplicaSpec:
    """``spec`` once it holds ``model``: its KV capacity recomputed for the new weights."""
    if spec.models and model.name not in spec.models:
        raise InputError(
            f"replica {spec.id} cannot hold {model.name}",
            field="model",
            expected="one of " + ", ".join(spec.models),
        )
    if model.name == spec.model.name:
        return spec
    if not spec.models:
        raise InputError(f"replica {spec.id} keeps {spec.model.name}", field="model")
    kv = kv_with_lora_slots(
        spec.accelerator,
        model,
        spec.tp,
        spec.gpu_memory_utilization,
        spec.max_loras,
        spec.max_lora_rank,
    )
    return replace(spec, model=model, kv_capacity_tokens=kv)


def load_fleet(path: str | Path) -> Fleet:
    """Read a fleet YAML file; every error names the file and the field."""
    p = Path(path)
    text = read_text(p, "fleet file")
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        line = None
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            line = mark.line + 1
        raise InputError("not valid YAML", source=str(p), line=line) from None
    return fleet_from_dict(raw, source=str(p))
