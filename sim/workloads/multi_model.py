"""``multi-model``: several base models and a few dozen LoRA adapters on one fleet.

Three populations from the real data, merged by arrival:

* **Llama-3-8B and its adapters** — the ServeGen language/m-small clients (Alibaba Bailian; real
  per-client rates, burstiness and length mixes). The :data:`BASE_CLIENTS` busiest clients use
  the base model; every other active client is a customer with its own fine-tunes: its
  requests go to ``1 + ⌊rate / ADAPTER_RPS⌋`` adapters (at most :data:`MAX_ADAPTERS_PER_CLIENT`),
  drawn Zipf(1) from ``seed``. This split of a client over its adapters is the one synthetic
  step (ServeGen records clients, not adapters); adapter ranks cycle through 8/16/32/64.
* **Qwen2-7B** (the architecture of DeepSeek-R1-Distill-Qwen-7B) — the ServeGen
  reason/deepseek-r1 clients (Bailian's reasoning traffic: ~1k-token prompts, ~1.3k-token
  outputs), at the same :data:`SERVEGEN_RATE_SCALE`. Both 7–8B models may be held by any of the
  fleet's single-H100 replicas (``data/fleets/multimodel.yaml``): the plan decides how many
  hold which.
* **Llama-3-70B** (TP 4) — every :data:`LARGE_KEEP_EVERY`-th request of the Azure 2023
  conversation trace (one tenant, ``chat-70b``), prompts clipped to the model's 8k context.

ServeGen's ~800 req/s are scaled by :data:`SERVEGEN_RATE_SCALE` (relative rates and gap shapes
kept) to keep the run small, and the Azure trace thinned so that on ``data/fleets/multimodel.yaml``
both pools are offered about the same share of their nominal capacity (the 8B mix's requests are
short: ~73 req/s per H100 against ~4.8 req/s of chat per 4×H100 70B replica). Credits are
0.6 / 0.4 over the 7–8B models and the 70B; the 0.6 split between the two ServeGen populations
by their nominal demand over the head (0.375 / 0.225), each client keeping its rate-proportional
part.

Both ServeGen populations start :data:`SERVEGEN_START_S` into their traces (1 h 50 min, the same
clock for both): there the two move apart within the span, as their real per-client rates do
at the 2-h window (the m-small clients' total falls from ~620 to ~490 req/s, the reasoning
clients' rises from ~24 to ~32). At the traces' start they barely drift (head to tail −6% and
+11%). The 70B's Azure hour starts at its beginning.
"""

from __future__ import annotations

import hashlib

import numpy as np

from placement.domain.adapters import LoraAdapter
from placement.domain.requests import Request, Tenant
from sim.workloads.azure import load_azure
from sim.workloads.base import Workload
from sim.workloads.servegen import load_servegen

SMALL_MODEL = "llama-3-8b"
REASON_MODEL = "qwen2-7b"  # DeepSeek-R1-Distill-Qwen-7B's architecture
LARGE_MODEL = "llama-3-70b"
LARGE_CONTEXT = 8192
LARGE_TENANT = "chat-70b"
BASE_CLIENTS = 1
ADAPTER_RPS = 5.0  # native ServeGen req/s per adapter a client fine-tunes
MAX_ADAPTERS_PER_CLIENT = 4
RANKS = (8, 16, 32, 64)
SERVEGEN_RATE_SCALE = 0.1
SERVEGEN_START_S = 6600.0
LARGE_KEEP_EVERY = 3
CREDITS = {"small": 0.375, "reason": 0.225, "large": 0.4}
DEFAULT_SPAN_S = 900.0


def _rng(seed: int, name: str) -> np.random.Generator:
    digest = hashlib.sha256(f"{seed}:{name}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def load_multi_model(*, seed: int = 0, duration_s: float | None = None) -> Workload:
    """The ``multi-model`` workload over ``duration_s`` (default :data:`DEFAULT_SPAN_S`)."""
    span = DEFAULT_SPAN_S if duration_s is None else duration_s
    small = load_servegen(
        "language",
        "m-small",
        duration_s=span,
        start_s=SERVEGEN_START_S,
        seed=seed,
        tenant_prefix="lm",
        rate_scale=SERVEGEN_RATE_SCALE,
    )
    reason = load_servegen(
        "reason",
        "deepseek-r1",
        duration_s=span,
        start_s=SERVEGEN_START_S,
        seed=seed,
        tenant_prefix="rs",
        rate_scale=SERVEGEN_RATE_SCALE,
    )
    large = load_azure("conv").window(0.0, span)
    counts: dict[str, int] = {}
    for r in small.requests:
        counts[r.tenant] = counts.get(r.tenant, 0) + 1
    by_volume = sorted(counts, key=lambda t: (-counts[t], t))
    adapters: dict[str, LoraAdapter] = {}
    choice: dict[str, tuple[list[str], np.ndarray]] = {}
    native_s = span  # requests per second at ServeGen's own rate, before the scale
    for tenant in by_volume[BASE_CLIENTS:]:
        rate = counts[tenant] / native_s / SERVEGEN_RATE_SCALE
        k = min(MAX_ADAPTERS_PER_CLIENT, 1 + int(rate // ADAPTER_RPS))
        names = [f"{tenant}-lora{j}" for j in range(k)]
        for name in names:
            rank = RANKS[len(adapters) % len(RANKS)]
            adapters[name] = LoraAdapter(name=name, base=SMALL_MODEL, rank=rank)
        zipf = 1.0 / np.arange(1, k + 1)
        choice[tenant] = (names, zipf / zipf.sum())
    requests: list[Request] = []
    draws = {t: _rng(seed, t) for t in choice}
    for r in small.requests:
        adapter = ""
        if r.tenant in choice:
            names, p = choice[r.tenant]
            adapter = names[int(draws[r.tenant].choice(len(names), p=p))]
        requests.append(
            Request(
                0,
                r.arrival_s,
                r.input_tokens,
                r.output_tokens,
                tenant=r.tenant,
                request_class=r.request_class,
                model=SMALL_MODEL,
                adapter=adapter,
            )
        )
    for r in reason.requests:
        requests.append(
            Request(
                0,
                r.arrival_s,
                r.input_tokens,
                r.output_tokens,
                tenant=r.tenant,
                request_class=r.request_class,
                model=REASON_MODEL,
            )
        )
    for r in large.requests[::LARGE_KEEP_EVERY]:
        prompt = max(1, min(r.input_tokens, LARGE_CONTEXT - r.output_tokens - 1))
        out = min(r.output_tokens, LARGE_CONTEXT - prompt - 1)
        requests.append(
            Request(
                0,
                r.arrival_s,
                prompt,
                max(1, out),
                tenant=LARGE_TENANT,
                request_class=r.request_class,
                model=LARGE_MODEL,
            )
        )
    requests.sort(key=lambda q: (q.arrival_s, q.model, q.tenant))
    for i, q in enumerate(requests):
        q.id = i
    tenants = {
        name: Tenant(name=name, credit_share=CREDITS["small"] * t.credit_share)
        for name, t in small.tenants.items()
    }
    for name, t in reason.tenants.items():
        tenants[name] = Tenant(name=name, credit_share=CREDITS["reason"] * t.credit_share)
    tenants[LARGE_TENANT] = Tenant(name=LARGE_TENANT, credit_share=CREDITS["large"])
    return Workload(
        name="multi-model",
        requests=requests,
        tenants=tenants,
        classes={**reason.classes, **small.classes},
        block_tokens=small.block_tokens,
        adapters=adapters,
    )
