"""What the loop tunes on the head of a trace: the route profile's scorer weights and, on traffic
with shared prefixes, the share of each replica's KV memory the plan may fill with warm
prefixes, picked from a small grid by goodput summed over a few loads; and, on traffic of more
than one request class over more than one accelerator kind, whether the plan's choice of
replicas binds (``plan_picker: planned``, :data:`PLAN_PICKER_CHOICES`).

The admission gate's headroom is not tuned (:data:`HEADROOMS` holds 1.0 alone): the gate
refuses by the chance that a request misses its SLO (:mod:`serving.admission.slo_gate`),
learned per replica from its first tokens, so the limit is the SLO itself. A headroom picked
for goodput on the head would refuse requests that meet (below 1) or admit misses (above).

Once the route setting is chosen, what the gate does *past capacity* is tuned with it
(:func:`gate_variants`): its defaults (refuse at a 0.5 chance of a miss, tenants owed credit
lifted halfway back to 0.9) or a strict regime on top (:data:`STRICT_REFUSE_AT`, no lift) that
engages as far as the gate's refusals led by the first token say its queues overflow
(:meth:`serving.admission.slo_gate.SloGate.strictness`). An
admitted request that misses there also delays those queued behind it and, on a kind whose
prompt chunk is slower than a class's TPOT SLO, the decodes beside it; where the forecasts hold,
the strict gate keeps goodput from falling past the knee (head of ``synthetic`` over the
heterogeneous fleet, loads 3 / 4: 41.2 / 38.1 → 48.9 / 48.0 req/s), but where they are
pessimistic it refuses requests that would meet (``tiers`` at load 1: 21.8 → 17.0 req/s on the
head). So the strict gate is kept only if it gains in sum *and* loses no more than
:data:`NO_LOSS` at any tuning load (:func:`keeps_every_load`): a gain past the knee does not
buy a loss below it. That rule alone let through a loss the head did not show: on ``tiers``
the strict threshold engaged by every SLO refusal (its own TPOT refusals included) lost 7% at
load 1 on the tail; engaged by the queue, it loses nowhere there (bench/RESULTS.md).

The gate's TPOT forecast by work (``Setting.tpot_by_work``: prompt tokens to compute, their
attention over the cached context, each replica's learned TPOT ratio) is not offered: tried on
top of the chosen setting under the same rule, the heads of both ``kv-bound`` fleets kept it
and their tails lost 3–9% at loads 3–4 (bench/RESULTS.md). A ``Case.settings`` may still fix it.
Nor is ``Setting.tpot_shed_from`` (the TPOT rule refusing only at a 0.9 chance of a miss until
that share of SLO refusals): on the tails, with the chosen settings fixed, it lost 2–5% at
loads 3–4 of ``tiers`` and of ``kv-bound`` over the heterogeneous fleet (bench/RESULTS.md).

Last, the scraped waiting queue's price (:func:`waiting_variant`, ``waiting.price`` in the
route profile, :mod:`serving.route.waiting_queue`): a waiting request at the mean uncached prompt
the router dispatched to that replica rather than at 1,024 tokens. Fixed on for every case it
gained on the tail of ``multi-model`` (short prompts) at every load but lost 3–10% past the knee
of ``kv-bound``, ``tiers`` and ``mixed`` (bench/RESULTS.md). So it is offered, on top of the
chosen setting under :func:`keeps_every_load`, only to traffic whose head's mean prompt the
constant overprices by more than :data:`SHORT_PROMPT_FACTOR`: the head alone does not screen the
loss out (on ``kv-bound`` over ``h100x8`` it kept the price, and its tail lost 10% at load 4).
Even so it is offered only when asked (``Case.offer_waiting_price``, ``--offer-waiting-price``):
on ``multi-model`` it lost at the ratio load and lowered the gate's precision and Jain's index.

The gate's credit reserve (``Setting.credit_reserve``, :data:`CREDIT_RESERVE`): past capacity,
a tenant over its share is judged against a TTFT limit shortened by the reserve × its standing
among the active tenants, so it queues only where the tenants owed still have room. Offered
only when asked (``Case.offer_credit_reserve``, ``--offer-credit-reserve``), only to traffic
whose tenants' request shapes differ (:func:`shapes_differ`) and only where no share cap holds
(the case fixes none and the head did not keep the one offered), on top of the chosen setting;
a fairness setting, it is kept where it loses at no tuning load (:func:`keeps_every_load`), gain
or not: on the head of ``chat-longdoc-code``'s seed 1 it cost 1.2% at load 3 and 0.3% in sum,
and on that seed's tail it lost nowhere and raised Jain's index at 2× overload from 0.84 to
0.95. Where the cap holds the reserve is not tried: offered before the cap, the head of
``mixed`` over ``h100x8`` kept the reserve (and then refused the cap), and its tail lost 3.6% at
load 1.5 and 2.5% at load 2; the cap alone loses nowhere there. Not a default: the head of
``mixed`` over the heterogeneous fleet keeps it (+6.6% at tuning load 3), and that tail then
loses 3.4% at load 1.5, 9.2% at 2 and 11% at 3 — the tenant furthest over its share yields, and
the one furthest under gets none of it (bench/RESULTS.md). On
``chat-longdoc-code`` over the heterogeneous fleet the code tenant's short decodes meet their
TPOT only on the H100s, where the long-document tenant's 12k-token prompts fill the queues its
bursts need (bench/RESULTS.md).

The gate's share cap (``Setting.share_cap``, :data:`SHARE_CAP`,
:mod:`serving.admission.share_cap`): past capacity, a tenant served more than 1.5 × its
credit-weighted max-min entitlement in its model's pool over the last 30 s yields. Offered to
traffic of several tenants (unless the case fixes a cap), on top of the chosen setting, kept
only where it gains in sum and loses at no tuning load, as the gate variants are. Fixed on for
every case it took ``multi-model``'s tail (seed 0) from Jain's index 0.506 to 0.745 at
overload and gained past the knee of ``mixed`` over ``h100x8``, but lost 2.1% at load 3 of
``mixed`` over the heterogeneous fleet, whose head loses with it too (−0.6% at loads 2 and 3),
as ``tiers``' head does (−3.2% at load 3): the head screens both out (bench/RESULTS.md).

A candidate profile is the shipped ``data/profiles/scored.yaml`` with two weights changed
(prefix match, predicted TTFT), written beside the case's telemetry so the chosen one can be
inspected and reused (``placement bench routing`` and the service read the same YAML).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from placement.domain.requests import Request
from placement.paths import repo_root
from placement.solver.instance import WARM_KV_SHARE
from serving.admission.slo_gate import DEFAULT_CREDIT_CUT, DEFAULT_OVERLOAD_REFUSE_AT
from serving.route.waiting_queue import QUEUED_PROMPT_TOKENS

BASE_PROFILE = repo_root() / "data" / "profiles" / "scored.yaml"
PREFIX_WEIGHTS = (1.0, 4.0, 12.0)
TTFT_WEIGHTS = (0.5, 2.0)
HEADROOMS = (1.0,)
TUNE_LOADS = (1.0, 2.0, 3.0)
# the plan's warm-prefix budget, × a replica's KV memory: the rest holds running sequences'
# own tokens, which a trace of short private text after long shared prefixes hardly needs
WARM_KV_SHARES = (WARM_KV_SHARE, 0.8)
# the base profile's picker (the plan steers, live load decides) and the one where the plan's
# replicas for a tenant bind: tried on traffic whose classes the plan may place apart
BASE_PLAN_PICKER = "scored"
PLAN_PICKER_CHOICES = (BASE_PLAN_PICKER, "planned")


# the strict gate past capacity (:func:`gate_variants`): refuse at this chance of a miss, and
# lift no tenant back toward the gate's threshold for being owed credit, while the queue says
# the fleet is past capacity
STRICT_REFUSE_AT = 0.3
STRICT_CREDIT_CUT = 0.0
# past capacity, a tenant whose credit counter leads the lowest active one by more than this
# (GPU-seconds per unit of credit share) yields outright what it asks for: tried on traffic
# with LoRA adapters (:func:`gate_variants`)
CREDIT_SLACK = 300.0
# past capacity, the share of the TTFT limit kept from the tenant furthest over its share for
# the tenants owed credit (:func:`reserve_variant`; 0.5 of 0.25 / 0.5 / 0.75 on the head of
# chat-longdoc-code: 0.75 lost 2% at load 2)
CREDIT_RESERVE = 0.5
# past capacity, the gate holds a tenant to this many times its credit-weighted max-min
# entitlement in its model's pool over the share cap's window (:func:`share_cap_variant`; 1.5 of
# 1 / 1.25 / 1.5 / 2 on the heads of multi-model, chat-longdoc-code and tiers: 1 lost 23% at
# load 3 on multi-model's head, 1.25 lost 11.6% on chat-longdoc-code's and 6.9% on tiers')
SHARE_CAP = 1.5
# tenants' request shapes differ when the mean prompt or the mean output of one tenant is this
# many times another's (among tenants of at least SHAPE_MIN_REQUESTS requests)
SHAPE_FACTOR = 8.0
SHAPE_MIN_REQUESTS = 20
# the most a gate variant may lose at one tuning load against the chosen route setting
NO_LOSS = 0.02
# the scraped waiting queue's price (``waiting.price``): the shipped one, and the one offered
BASE_WAITING_PRICE = "constant"
DISPATCHED_WAITING_PRICE = "dispatched"
# the price is offered where the constant (a waiting request at QUEUED_PROMPT_TOKENS) is more
# than this many times the head's mean prompt
SHORT_PROMPT_FACTOR = 2.0


@dataclass(frozen=True, slots=True)
class Setting:
    prefix_weight: float
    ttft_weight: float
    headroom: float
    warm_kv_share: float = WARM_KV_SHARE
    plan_picker: str = BASE_PLAN_PICKER
    overload_refuse_at: float = DEFAULT_OVERLOAD_REFUSE_AT
    credit_cut: float = DEFAULT_CREDIT_CUT
    strict_refuse_at: float | None = None  # None: no strict regime
    strict_credit_cut: float = STRICT_CREDIT_CUT
    credit_slack: float | None = None  # None: no tenant yields for credit alone
    credit_reserve: float = 0.0  # past capacity, the TTFT limit's share kept for owed tenants
    tpot_by_work: bool = False  # the gate's TPOT forecast by work
    tpot_shed_from: float | None = None  # the TPOT rule sheds from this pressure (None: always)
    waiting_price: str = BASE_WAITING_PRICE  # the route profile's ``waiting.price``
    share_cap: float | None = None  # the gate's share cap past capacity (None: the case's)


def grid(
    warm_kv_shares: tuple[float, ...] = (WARM_KV_SHARE,),
    plan_pickers: tuple[str, ...] = (BASE_PLAN_PICKER,),
) -> list[Setting]:
    return [
        Setting(*s)
        for s in itertools.product(
            PREFIX_WEIGHTS, TTFT_WEIGHTS, HEADROOMS, warm_kv_shares, plan_pickers
        )
    ]


def gate_variants(chosen: Setting, *, credit_slack: bool = False) -> list[Setting]:
    """The gate settings past capacity tried with the chosen route setting: the strict one;
    with ``credit_slack``, each of the two with :data:`CREDIT_SLACK` as well."""
    strict = dataclasses.replace(
        chosen, strict_refuse_at=STRICT_REFUSE_AT, strict_credit_cut=STRICT_CREDIT_CUT
    )
    variants = [strict]
    if credit_slack:
        variants += [dataclasses.replace(s, credit_slack=CREDIT_SLACK) for s in (chosen, strict)]
    return [v for v in variants if v != chosen]


def shapes_differ(requests: Iterable[Request]) -> bool:
    """Whether the tenants' request shapes differ: among tenants with at least
    :data:`SHAPE_MIN_REQUESTS` requests, one's mean prompt or mean output is at least
    :data:`SHAPE_FACTOR` times another's."""
    sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for r in requests:
        s = sums[r.tenant]
        s[0] += 1.0
        s[1] += r.input_tokens
        s[2] += r.output_tokens
    means = [(p / n, o / n) for n, p, o in sums.values() if n >= SHAPE_MIN_REQUESTS]
    if len(means) < 2:
        return False
    for axis in (0, 1):
        values = [m[axis] for m in means]
        if max(values) >= SHAPE_FACTOR * max(min(values), 1.0):
            return True
    return False


def reserve_variant(chosen: Setting) -> list[Setting]:
    """The chosen setting with the gate's credit reserve (:data:`CREDIT_RESERVE`); none if it
    already has it."""
    reserved = dataclasses.replace(chosen, credit_reserve=CREDIT_RESERVE)
    return [reserved] if reserved != chosen else []


def share_cap_variant(chosen: Setting) -> list[Setting]:
    """The chosen setting with the gate's share cap (:data:`SHARE_CAP`); none if it already
    has it."""
    capped = dataclasses.replace(chosen, share_cap=SHARE_CAP)
    return [capped] if capped != chosen else []


def waiting_variant(chosen: Setting, mean_prompt_tokens: float) -> list[Setting]:
    """The chosen setting with the scraped waiting queue priced by what was dispatched, offered
    to traffic of short prompts (the head's mean under :data:`QUEUED_PROMPT_TOKENS` over
    :data:`SHORT_PROMPT_FACTOR`); none otherwise, or if it already is."""
    if mean_prompt_tokens * SHORT_PROMPT_FACTOR >= QUEUED_PROMPT_TOKENS:
        return []
    priced = dataclasses.replace(chosen, waiting_price=DISPATCHED_WAITING_PRICE)
    return [priced] if priced != chosen else []


def keeps_every_load(
    variant: Sequence[float], base: Sequence[float], *, tolerance: float = NO_LOSS
) -> bool:
    """Whether a variant's goodput at every tuning load is within ``tolerance`` (a share) of the
    base setting's at the same load: a gain in sum bought with a loss at one load is refused."""
    return all(v >= (1.0 - tolerance) * b for v, b in zip(variant, base, strict=True))


def plan_pickers(request_classes: Iterable[str], accelerators: Iterable[str]) -> tuple[str, ...]:
    """The plan pickers worth tuning: whether the plan's replicas bind matters only where it
    may place classes apart (several request classes) on accelerators that differ."""
    several = len(set(request_classes)) > 1 and len(set(accelerators)) > 1
    return PLAN_PICKER_CHOICES if several else (BASE_PLAN_PICKER,)


def write_profile(setting: Setting, directory: Path, base: Path = BASE_PROFILE) -> Path:
    """The base profile with the setting's scorer weights, plan picker and waiting-queue price,
    as a YAML file in ``directory`` (named for the price only where it is not the shipped one)."""
    doc = yaml.safe_load(base.read_text())
    weights = {
        "prefix-match-scorer": setting.prefix_weight,
        "predicted-ttft-scorer": setting.ttft_weight,
    }
    for scorer in doc["scorers"]:
        if scorer["name"] in weights:
            scorer["weight"] = weights[scorer["name"]]
    doc["plan_picker"] = setting.plan_picker
    name = f"{setting.plan_picker}-p{setting.prefix_weight:g}-t{setting.ttft_weight:g}"
    if setting.waiting_price != BASE_WAITING_PRICE:
        doc["waiting"] = {**doc.get("waiting", {}), "price": setting.waiting_price}
        name += f"-waiting-{setting.waiting_price}"
    doc["name"] = name
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path
