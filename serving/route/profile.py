"""Route profiles: which filters, scorers and fallbacks the route path runs, from YAML.

The loader works in visible phases, each error naming the file and the field:

1. :func:`parse` — YAML text → mapping (a syntax error names the line);
2. :func:`with_defaults` — every key the file leaves out takes :data:`DEFAULTS`;
3. :func:`build` — plugin names → plugin objects from :mod:`serving.route.plugins`, each
   reading (and checking) its own parameters;
4. :func:`validate` — the profile as a whole holds together.

A profile file::

    name: default
    block_tokens: 512        # prefix block size of the request's block hashes
    candidates: 16           # replicas a fallback considers at most
    max_fallbacks: 3         # replica ids a decision lists for a proxy to try next
    ring: {key_blocks: 1, virtual_nodes: 64}
    filters: [health-filter, {name: freshness-filter, staleness_limit_s: 5.0}, …]
    scorers: [{name: prefix-match-scorer, weight: 2.0}, …]
    fallbacks:
      spill_to_secondary: true
      unseen_prefix: {picker: bounded-load-hash-picker, epsilon: 0.25}
      no_prefix: max-score-picker      # a prompt shorter than one block
      planned_unavailable: least-predicted-ttft-picker
      no_plan: max-score-picker
    waiting: {price: constant, since_scrape: false}   # the scraped queue in tokens

``waiting`` says how the scraped ``num_requests_waiting`` counts in the queue ahead of a request
(:mod:`serving.route.waiting_queue`): each at the mean uncached prompt the router dispatched
there (``dispatched``) or at a fixed 1,024 tokens (``constant``, the default), less the first
tokens seen since the scrape (``since_scrape``, off by default): both measured, neither kept on
(bench/RESULTS.md).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from placement.errors import InputError, read_text
from placement.paths import repo_root
from serving.route.plugins import (
    FILTERS,
    PICKERS,
    SCORERS,
    FallbackPicker,
    Params,
    ReplicaFilter,
    ReplicaScorer,
)
from serving.route.plugins.filters.load_cap_filter import LoadCapFilter
from serving.route.plugins.pickers.max_score_picker import MaxScorePicker
from serving.route.waiting_queue import PRICES

FALLBACK_SITUATIONS = ("unseen_prefix", "no_prefix", "planned_unavailable", "no_plan")
PLAN_PICKERS = ("weighted", "scored", "warm", "planned")

DEFAULTS: dict[str, Any] = {
    "name": "unnamed",
    "block_tokens": 512,
    "candidates": 8,
    "max_fallbacks": 3,
    "plan_picker": "weighted",
    "ring": {"key_blocks": 1, "virtual_nodes": 64},
    "filters": ["health-filter", "freshness-filter", "load-cap-filter"],
    "scorers": [
        {"name": "prefix-match-scorer", "weight": 2.0},
        {"name": "queue-scorer", "weight": 1.0},
    ],
    "fallbacks": {
        "spill_to_secondary": True,
        "unseen_prefix": "bounded-load-hash-picker",
        # a request with no full prefix block has no prefix to be affine to: hashing its
        # (tenant, model) on the ring filled the first replicas clockwise to the load bound
        # and left the last ones idle (bench/RESULTS.md, "Short prompts spread by load")
        "no_prefix": "max-score-picker",
        "planned_unavailable": "least-predicted-ttft-picker",
        "no_plan": "max-score-picker",
    },
    "waiting": {"price": "constant", "since_scrape": False},
    # a replica whose LoRA slots have freed too few times to measure their release rate: its
    # slot wait unknown, taken as none (False), or read from the time without a free (True;
    # :mod:`serving.route.adapter_slots`); the slot wait read from the engine's scraped
    # adapter lists (``engine_wait``, :mod:`serving.route.engine_slots`) or the book's alone
    "lora_slots": {"censored_rate": False, "engine_wait": True},
}


def default_profile_path() -> Path:
    return repo_root() / "data" / "profiles" / "default.yaml"


@dataclass(frozen=True, slots=True, kw_only=True)
class RouteProfile:
    """A built profile. ``load_cap`` is the load-cap filter when listed (its rule turns the
    plan's rate caps into in-flight caps), else None and planned replicas are uncapped."""

    name: str
    source: str
    block_tokens: int
    candidates: int
    max_fallbacks: int
    key_blocks: int
    virtual_nodes: int
    filters: tuple[ReplicaFilter, ...]
    scorers: tuple[tuple[ReplicaScorer, float], ...]
    spill_to_secondary: bool
    # how a request the plan covers picks among the fleet: "weighted" (the plan's weights, a
    # lookup) or "scored" (the no-plan scorers, the planned replicas credited with the group's
    # prefix: the plan steers, live load decides) or "warm" (scored among the replicas the plan
    # keeps the group's prefix warm on; over the fleet for a group it keeps warm nowhere) or
    # "planned" (scored among the entry's planned replicas, then among its secondaries, then
    # over the fleet: the plan's choice of accelerators for a tenant's class holds, live load
    # picks within it)
    plan_picker: str
    unseen_prefix: FallbackPicker
    no_prefix: FallbackPicker
    planned_unavailable: FallbackPicker
    no_plan: FallbackPicker
    # the scraped waiting queue: each request at the mean uncached prompt dispatched there
    # (else the constant), less the first tokens seen since the scrape
    price_waiting: bool = False
    waiting_since_scrape: bool = False
    # the LoRA slot books' release rate before enough frees were seen: the frees seen and the
    # next over the time watched (else unknown: no wait)
    slot_rate_censored: bool = False
    # the LoRA slot wait read from the engine's scraped adapter lists (vLLM's
    # lora_requests_info: handovers seen between scrapes, :mod:`serving.route.engine_slots`)
    # instead of the router's book alone
    slot_wait_from_engine: bool = False

    @property
    def load_cap(self) -> LoadCapFilter | None:
        for f in self.filters:
            if isinstance(f, LoadCapFilter):
                return f
        return None

    @property
    def uses_prefix_index(self) -> bool:
        """Whether any scorer reads the router's prefix index (kept only then)."""
        return any("router prefix index" in s.signals for s, w in self.scorers if w > 0)


# ---- phase 1: parse ---------------------------------------------------------------------------
def parse(text: str, *, source: str) -> dict[str, Any]:
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = None if mark is None else mark.line + 1
        raise InputError(f"not valid YAML: {exc}", source=source, line=line) from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise InputError("a profile must be a mapping", source=source, expected="key: value lines")
    return raw


# ---- phase 2: defaults ------------------------------------------------------------------------
def with_defaults(raw: dict[str, Any], *, source: str) -> dict[str, Any]:
    unknown = sorted(set(raw) - set(DEFAULTS))
    if unknown:
        raise InputError(
            "unknown key", source=source, field=unknown[0], expected="one of " + ", ".join(DEFAULTS)
        )
    out = copy.deepcopy(DEFAULTS)
    for key, value in raw.items():
        if key in ("ring", "fallbacks", "waiting", "lora_slots") and isinstance(value, dict):
            out[key].update(value)
        else:
            out[key] = value
    return out


# ---- phase 3: build ---------------------------------------------------------------------------
def _spec(
    item: Any, *, source: str, field: str, name_key: str = "name"
) -> tuple[str, dict[str, Any]]:
    """A plugin given as ``"name"`` or ``{name: …, params…}`` → (name, params)."""
    if isinstance(item, str):
        return item, {}
    if isinstance(item, dict) and isinstance(item.get(name_key), str):
        params = {k: v for k, v in item.items() if k != name_key}
        return item[name_key], params
    raise InputError(
        f"got {item!r}", source=source, field=field, expected=f"a plugin name or {{{name_key}: …}}"
    )


def _lookup(registry: dict[str, Any], name: str, *, source: str, field: str) -> Any:
    factory = registry.get(name)
    if factory is None:
        raise InputError(
            f"unknown plugin {name!r}",
            source=source,
            field=field,
            expected="one of " + ", ".join(sorted(registry)),
        )
    return factory


def _integer(raw: dict[str, Any], key: str, minimum: int, *, source: str, prefix: str = "") -> int:
    value = raw[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InputError(
            f"got {value!r}", source=source, field=prefix + key, expected=f"an integer >= {minimum}"
        )
    return value


def _list(raw: dict[str, Any], key: str, *, source: str) -> list[Any]:
    value = raw[key]
    if not isinstance(value, list):
        raise InputError(f"got {value!r}", source=source, field=key, expected="a list")
    return value


def build(raw: dict[str, Any], *, source: str) -> RouteProfile:
    filters: list[ReplicaFilter] = []
    for n, item in enumerate(_list(raw, "filters", source=source)):
        field = f"filters[{n}]"
        name, params = _spec(item, source=source, field=field)
        factory = _lookup(FILTERS, name, source=source, field=f"{field}.name")
        filters.append(factory(Params(params, source=source, field=field)))
    scorers: list[tuple[ReplicaScorer, float]] = []
    for n, item in enumerate(_list(raw, "scorers", source=source)):
        field = f"scorers[{n}]"
        name, params = _spec(item, source=source, field=field)
        factory = _lookup(SCORERS, name, source=source, field=f"{field}.name")
        p = Params(params, source=source, field=field)
        weight = p.number("weight", 1.0, minimum=0.0)
        scorers.append((factory(p), weight))
    ring = _section(raw["ring"], "ring", ("key_blocks", "virtual_nodes"), source=source)
    fallbacks = _section(
        raw["fallbacks"],
        "fallbacks",
        ("spill_to_secondary", *FALLBACK_SITUATIONS),
        source=source,
        what="situation",
    )
    spill = _flag(fallbacks["spill_to_secondary"], "fallbacks.spill_to_secondary", source=source)
    plan_picker = raw["plan_picker"]
    if plan_picker not in PLAN_PICKERS:
        raise InputError(
            f"got {plan_picker!r}",
            source=source,
            field="plan_picker",
            expected=" or ".join(PLAN_PICKERS),
        )
    frozen_scorers = tuple(scorers)
    pickers: dict[str, FallbackPicker] = {}
    for situation in FALLBACK_SITUATIONS:
        field = f"fallbacks.{situation}"
        name, params = _spec(fallbacks[situation], source=source, field=field, name_key="picker")
        factory = _lookup(PICKERS, name, source=source, field=f"{field}.picker")
        pickers[situation] = factory(Params(params, source=source, field=field), frozen_scorers)
    price, since_scrape = _waiting(raw["waiting"], source=source)
    lora_slots = _section(
        raw["lora_slots"], "lora_slots", ("censored_rate", "engine_wait"), source=source
    )
    censored = _flag(lora_slots["censored_rate"], "lora_slots.censored_rate", source=source)
    engine_wait = _flag(lora_slots["engine_wait"], "lora_slots.engine_wait", source=source)
    name = raw["name"]
    if not isinstance(name, str) or not name:
        raise InputError(
            f"got {name!r}", source=source, field="name", expected="a non-empty string"
        )
    return RouteProfile(
        name=name,
        source=source,
        block_tokens=_integer(raw, "block_tokens", 1, source=source),
        candidates=_integer(raw, "candidates", 1, source=source),
        max_fallbacks=_integer(raw, "max_fallbacks", 0, source=source),
        key_blocks=_integer(ring, "key_blocks", 1, source=source, prefix="ring."),
        virtual_nodes=_integer(ring, "virtual_nodes", 1, source=source, prefix="ring."),
        filters=tuple(filters),
        scorers=frozen_scorers,
        spill_to_secondary=spill,
        plan_picker=plan_picker,
        unseen_prefix=pickers["unseen_prefix"],
        no_prefix=pickers["no_prefix"],
        planned_unavailable=pickers["planned_unavailable"],
        no_plan=pickers["no_plan"],
        price_waiting=price == "dispatched",
        waiting_since_scrape=since_scrape,
        slot_rate_censored=censored,
        slot_wait_from_engine=engine_wait,
    )


def _flag(value: Any, field: str, *, source: str) -> bool:
    """A true-or-false key, or a clear error naming ``field``."""
    if not isinstance(value, bool):
        raise InputError(f"got {value!r}", source=source, field=field, expected="true or false")
    return value


def _waiting(waiting: Any, *, source: str) -> tuple[str, bool]:
    """The ``waiting`` mapping: its price and whether it counts since the scrape."""
    waiting = _section(waiting, "waiting", ("price", "since_scrape"), source=source)
    price = waiting["price"]
    if price not in PRICES:
        raise InputError(
            f"got {price!r}", source=source, field="waiting.price", expected=" or ".join(PRICES)
        )
    since_scrape = _flag(waiting["since_scrape"], "waiting.since_scrape", source=source)
    return price, since_scrape


# ---- phase 4: validate ------------------------------------------------------------------------
def validate(profile: RouteProfile) -> RouteProfile:
    seen: set[str] = set()
    for n, f in enumerate(profile.filters):
        if f.name in seen:
            raise InputError(
                f"{f.name} listed twice", source=profile.source, field=f"filters[{n}].name"
            )
        seen.add(f.name)
    seen.clear()
    for n, (s, _) in enumerate(profile.scorers):
        if s.name in seen:
            raise InputError(
                f"{s.name} listed twice", source=profile.source, field=f"scorers[{n}].name"
            )
        seen.add(s.name)
    for situation in FALLBACK_SITUATIONS:
        picker = getattr(profile, situation)
        if isinstance(picker, MaxScorePicker) and not any(w > 0 for _, w in profile.scorers):
            raise InputError(
                "max-score-picker needs at least one scorer with weight > 0",
                source=profile.source,
                field=f"fallbacks.{situation}",
                expected="a scorer under 'scorers' or another picker",
            )
    return profile


def profile_from_text(text: str, *, source: str = "<profile>") -> RouteProfile:
    """Parse → defaults → build → validate."""
    return validate(build(with_defaults(parse(text, source=source), source=source), source=source))


def load_profile(path: str | Path | None = None) -> RouteProfile:
    """A profile file (default: ``data/profiles/default.yaml``)."""
    p = Path(path) if path is not None else default_profile_path()
    return profile_from_text(read_text(p, "route profile"), source=str(p))


def _section(
    value: Any, name: str, keys: tuple[str, ...], *, source: str, what: str = "key"
) -> dict[str, Any]:
    """A profile's mapping ``name``, checked to hold only ``keys`` (errors name the field)."""
    if not isinstance(value, dict):
        raise InputError(f"got {value!r}", source=source, field=name, expected="a mapping")
    unknown = sorted(set(value) - set(keys))
    if unknown:
        raise InputError(
            f"unknown {what}",
            source=source,
            field=f"{name}.{unknown[0]}",
            expected=", ".join(keys),
        )
    return value
