"""Workloads by name, as the CLI and benchmarks ask for them.

=================  =========================================================================
name               what
=================  =========================================================================
mooncake           Mooncake conversation trace (2,100 s, real prefix sharing)
azure-conv         Azure 2023 chat trace (1 h, no prefix information)
azure-code         Azure 2023 code-completion trace (1 h, no prefix information)
servegen           ServeGen language/m-small clients, default 3,600 s from t = 0
servegen-reason    ServeGen reason/deepseek-r1 clients, default 3,600 s from t = 0
synthetic          :func:`synthetic_tenants` at 20 requests/s, default 600 s
mixed              three tenant populations merged by arrival (see :func:`load_mixed`)
kv-bound           hot shared documents over Azure chat arrivals (:mod:`sim.workloads.kv_bound`)
multi-model        Llama-3-8B + a few dozen LoRA adapters and Llama-3-70B (:mod:`.multi_model`)
tiers              interactive and batch tenants of four real traces (:mod:`sim.workloads.tiers`)
=================  =========================================================================

``duration_s`` cuts a trace to its first ``duration_s`` seconds (or sets the generated span);
``limit`` then keeps the first ``limit`` requests; ``seed`` drives the generated workloads.
"""

from __future__ import annotations

from collections.abc import Callable

from placement.domain.requests import Tenant
from placement.errors import InputError
from sim.workloads.assemble import merge
from sim.workloads.azure import load_azure
from sim.workloads.base import Workload
from sim.workloads.kv_bound import kv_bound
from sim.workloads.mooncake import load_mooncake
from sim.workloads.multi_model import load_multi_model
from sim.workloads.servegen import load_servegen, servegen_client_rates
from sim.workloads.synthetic import synthetic_tenants
from sim.workloads.tiers import load_tiers

SERVEGEN_DEFAULT_S = 3600.0
SYNTHETIC_DEFAULT_S = 600.0
SYNTHETIC_RATE_RPS = 20.0
KV_BOUND_DEFAULT_S = 1200.0
# Credit split of the "mixed" populations and the share of its requests that come from ServeGen.
MIXED_CREDITS = {"servegen": 0.5, "azure-conv": 0.3, "azure-code": 0.2}
MIXED_SERVEGEN_REQUEST_SHARE = 0.5


def _trace(load: Callable[[], Workload]) -> Callable[[int, float | None], Workload]:
    def build(seed: int, duration_s: float | None) -> Workload:
        del seed  # a recorded trace has no randomness
        workload = load()
        return workload if duration_s is None else workload.window(0.0, duration_s)

    return build


def _servegen(category: str, model: str) -> Callable[[int, float | None], Workload]:
    def build(seed: int, duration_s: float | None) -> Workload:
        span = SERVEGEN_DEFAULT_S if duration_s is None else duration_s
        return load_servegen(category, model, duration_s=span, seed=seed)

    return build


def _synthetic(seed: int, duration_s: float | None) -> Workload:
    span = SYNTHETIC_DEFAULT_S if duration_s is None else duration_s
    return synthetic_tenants(duration_s=span, rate_rps=SYNTHETIC_RATE_RPS, seed=seed)


def load_mixed(
    *,
    seed: int = 0,
    duration_s: float | None = None,
    category: str = "language",
    model: str = "m-small",
) -> Workload:
    """ServeGen tenants (``category``/``model``: language/m-small by default) + Azure conv +
    Azure code, merged by arrival time.

    Tenants: ``servegen-<i>`` (one per active ServeGen client), ``azure-conv`` and ``azure-code``.
    Credits are split 0.5 / 0.3 / 0.2 over the three populations (:data:`MIXED_CREDITS`); inside
    the ServeGen population each client keeps its rate-proportional share of the 0.5. Left as
    is, ServeGen (~800 requests/s) would drown the Azure traces (~8 requests/s together), so every
    ServeGen client's rate is scaled by one factor (``rate_scale``) chosen so that ServeGen makes
    up about :data:`MIXED_SERVEGEN_REQUEST_SHARE` of the requests. Scaling keeps the clients'
    relative rates, diurnal shape and gap shapes (burstiness). By request count ServeGen clients
    then ask for about their credit, ``azure-conv`` (~34% of requests) for more than its 0.3 and
    ``azure-code`` (~16%, but long prompts) for less than its 0.2.
    """
    span = SERVEGEN_DEFAULT_S if duration_s is None else duration_s
    conv = load_azure("conv").window(0.0, span)
    code = load_azure("code").window(0.0, span)
    share = MIXED_SERVEGEN_REQUEST_SHARE
    wanted_rps = share / (1.0 - share) * (len(conv) + len(code)) / span
    trace_rps = sum(servegen_client_rates(category, model, duration_s=span).values())
    servegen = load_servegen(
        category,
        model,
        duration_s=span,
        seed=seed,
        tenant_prefix="servegen",
        rate_scale=wanted_rps / trace_rps,
    )
    tenants = {
        name: Tenant(name=name, credit_share=MIXED_CREDITS["servegen"] * t.credit_share)
        for name, t in servegen.tenants.items()
    }
    for kind in ("azure-conv", "azure-code"):
        tenants[kind] = Tenant(name=kind, credit_share=MIXED_CREDITS[kind])
    return merge("mixed", [servegen, conv, code], tenants)


def _kv_bound(seed: int, duration_s: float | None) -> Workload:
    return kv_bound(duration_s=KV_BOUND_DEFAULT_S if duration_s is None else duration_s, seed=seed)


def _tiers(seed: int, duration_s: float | None) -> Workload:
    def source(name: str, seed: int, span: float) -> Workload:
        return _BUILDERS[name](seed, span)

    sources = tuple(n for n in _BUILDERS if n != "tiers")
    return load_tiers(source, sources, seed=seed, duration_s=duration_s)


_BUILDERS: dict[str, Callable[[int, float | None], Workload]] = {
    "mooncake": _trace(load_mooncake),
    "azure-conv": _trace(lambda: load_azure("conv")),
    "azure-code": _trace(lambda: load_azure("code")),
    "servegen": _servegen("language", "m-small"),
    "servegen-reason": _servegen("reason", "deepseek-r1"),
    "synthetic": _synthetic,
    "mixed": lambda seed, duration_s: load_mixed(seed=seed, duration_s=duration_s),
    "kv-bound": _kv_bound,
    "multi-model": lambda seed, duration_s: load_multi_model(seed=seed, duration_s=duration_s),
    "tiers": _tiers,
}
WORKLOADS: tuple[str, ...] = tuple(_BUILDERS)


def load_workload(
    name: str, *, seed: int = 0, duration_s: float | None = None, limit: int | None = None
) -> Workload:
    """The workload called ``name`` (one of :data:`WORKLOADS`)."""
    build = _BUILDERS.get(name)
    if build is None:
        raise InputError(
            f"unknown workload {name!r}",
            field="workload",
            expected="one of " + ", ".join(WORKLOADS),
        )
    if duration_s is not None and not duration_s > 0:
        raise InputError(f"duration_s={duration_s!r}", field="duration_s", expected="> 0")
    if limit is not None and limit < 0:
        raise InputError(f"limit={limit!r}", field="limit", expected=">= 0")
    workload = build(seed, duration_s)
    if limit is not None and limit < len(workload):
        workload = Workload(
            name=workload.name,
            requests=workload.requests[:limit],
            tenants=workload.tenants,
            classes=workload.classes,
            block_tokens=workload.block_tokens,
            adapters=workload.adapters,
        )
    return workload
