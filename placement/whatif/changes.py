"""A case's changes applied to the base inputs: fleet, demand, SLOs, tenants' credits.

Each function takes the base value and returns a new one (nothing is mutated) and raises an
:class:`InputError` naming the case's field (``where`` is ``cases.2`` or ``sweep.values.1``)
when a change names something that is not there or contradicts itself.

**Demand multipliers** thin or duplicate requests deterministically: a request with multiplier
``m`` is kept ``⌊m⌋`` times plus once more with probability ``m − ⌊m⌋``, the draws seeded by the
scenario's seed. A duplicate arrives up to :data:`DUPLICATE_JITTER_S` later and keeps the
original's prefix blocks except the last (the same system prompt and conversation prefix, not
a byte-identical prompt a cache would serve whole).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from placement.domain.accelerators import get_accelerator
from placement.domain.requests import Request, RequestClass, Tenant
from placement.errors import InputError
from placement.whatif.scenario import Changes, DemandChange, SloChange, TenantChange

DUPLICATE_JITTER_S = 1.0
CREDIT_TOLERANCE = 1e-9
_HASH_MASK = (1 << 63) - 1
_DEMAND_SEED = 0x5CA1E


def _fleet_models(doc: Mapping[str, Any]) -> set[str]:
    return {str(g.get("model")) for g in doc.get("replicas", []) if isinstance(g, dict)}


def _remove(groups: list[dict[str, Any]], changes: Changes, *, source: str, where: str) -> None:
    for i, rm in enumerate(changes.remove_replicas):
        field = f"{where}.remove_replicas.{i}"
        if rm.kind is not None:
            chosen = [g for g in groups if g.get("kind") == rm.kind]
            if not chosen:
                raise InputError(
                    f"the fleet has no group {rm.kind!r}",
                    source=source,
                    field=f"{field}.kind",
                    expected="one of " + ", ".join(str(g.get("kind")) for g in groups),
                )
        else:
            assert rm.accelerator is not None
            kind = get_accelerator(rm.accelerator, source=source, field=f"{field}.accelerator").kind
            chosen = [g for g in groups if get_accelerator(str(g.get("accelerator"))).kind == kind]
        have = sum(int(g.get("count", 0)) for g in chosen)
        if rm.count > have:
            raise InputError(
                f"removes {rm.count} replicas but only {have} are left",
                source=source,
                field=f"{field}.count",
                expected=f"≤ {have}",
            )
        left = rm.count
        for g in reversed(chosen):  # the last group first, and its highest ids
            take = min(left, int(g["count"]))
            g["count"] = int(g["count"]) - take
            left -= take
        groups[:] = [g for g in groups if int(g.get("count", 0)) > 0]


def _add(
    groups: list[dict[str, Any]], models: set[str], changes: Changes, *, source: str, where: str
) -> None:
    for i, add in enumerate(changes.add_replicas):
        field = f"{where}.add_replicas.{i}"
        acc = get_accelerator(add.accelerator, source=source, field=f"{field}.accelerator")
        model = add.model
        if model is None:
            if len(models) != 1:
                raise InputError(
                    "the fleet serves several models: say which",
                    source=source,
                    field=f"{field}.model",
                    expected="one of " + ", ".join(sorted(models)),
                )
            model = next(iter(models))
        if add.count == 0:
            continue

        def same(
            g: dict[str, Any], acc_kind: str = acc.kind, m: str = model, tp: int = add.tp
        ) -> bool:
            return (
                get_accelerator(str(g.get("accelerator"))).kind == acc_kind
                and g.get("model") == m
                and int(g.get("tp", 1)) == tp
            )

        if add.kind is not None:
            target = next((g for g in groups if g.get("kind") == add.kind), None)
            if target is not None and not same(target):
                raise InputError(
                    f"group {add.kind!r} holds {target.get('accelerator')} × "
                    f"{target.get('model')} (tp {target.get('tp', 1)}), not {acc.kind} × {model} "
                    f"(tp {add.tp})",
                    source=source,
                    field=f"{field}.kind",
                    expected="a new group name or a group of the same accelerator, model and tp",
                )
        else:
            target = next((g for g in groups if same(g)), None)
        if target is not None:
            target["count"] = int(target["count"]) + add.count
            continue
        name = add.kind or acc.kind.lower() + (f"-tp{add.tp}" if add.tp > 1 else "")
        taken = {g.get("kind") for g in groups}
        base, n = name, 2
        while name in taken:
            name, n = f"{base}-{n}", n + 1
        groups.append(
            {
                "kind": name,
                "accelerator": acc.kind,
                "count": add.count,
                "model": model,
                "tp": add.tp,
            }
        )


def apply_fleet_changes(
    fleet_doc: Mapping[str, Any], changes: Changes, *, source: str, where: str
) -> dict[str, Any]:
    """The fleet document with replicas removed, then added (call inside
    :func:`~placement.whatif.accelerators.scenario_accelerators`)."""
    doc = copy.deepcopy(dict(fleet_doc))
    groups: list[dict[str, Any]] = [dict(g) for g in doc.get("replicas", [])]
    models = _fleet_models(doc)
    _remove(groups, changes, source=source, where=where)
    _add(groups, models, changes, source=source, where=where)
    if not groups:
        raise InputError(
            "removes every replica of the fleet",
            source=source,
            field=f"{where}.remove_replicas",
            expected="at least one replica left",
        )
    doc["replicas"] = groups
    return doc


def apply_tenant_changes(
    tenants: Mapping[str, Tenant],
    changes: Mapping[str, TenantChange],
    *,
    source: str,
    where: str,
) -> dict[str, Tenant]:
    """Tenants with new credits; refuses unknown tenants, guarantees over 1 in total and a
    burst cap below the guarantee."""
    out = dict(tenants)
    for name, ch in changes.items():
        field = f"{where}.tenants.{name}"
        if name not in out:
            raise InputError(
                f"unknown tenant {name!r}",
                source=source,
                field=field,
                expected="one of " + ", ".join(sorted(out)),
            )
        t = out[name]
        out[name] = replace(
            t,
            credit_share=t.credit_share if ch.credit_share is None else ch.credit_share,
            burst_cap=t.burst_cap if ch.burst_cap is None else ch.burst_cap,
            weight=t.weight if ch.weight is None else ch.weight,
        )
        if out[name].burst_cap + CREDIT_TOLERANCE < out[name].credit_share:
            raise InputError(
                f"burst cap {out[name].burst_cap:g} is below the guaranteed credit share "
                f"{out[name].credit_share:g}",
                source=source,
                field=f"{field}.burst_cap",
                expected="burst_cap ≥ credit_share",
            )
    total = sum(t.credit_share for t in out.values())
    if total > 1 + CREDIT_TOLERANCE and changes:
        name = next(iter(changes))
        raise InputError(
            f"guaranteed credit shares sum to {total:.3f}",
            source=source,
            field=f"{where}.tenants.{name}.credit_share",
            expected="a total ≤ 1",
        )
    return out


def apply_slo_changes(
    classes: Mapping[str, RequestClass],
    changes: Mapping[str, SloChange],
    *,
    source: str,
    where: str,
) -> dict[str, RequestClass]:
    out = dict(classes)
    for name, ch in changes.items():
        if name not in out:
            raise InputError(
                f"unknown request class {name!r}",
                source=source,
                field=f"{where}.slos.{name}",
                expected="one of " + ", ".join(sorted(out)),
            )
        c = out[name]
        out[name] = replace(
            c,
            ttft_slo_s=c.ttft_slo_s if ch.ttft_slo_s is None else ch.ttft_slo_s,
            tpot_slo_s=c.tpot_slo_s if ch.tpot_slo_s is None else ch.tpot_slo_s,
        )
    return out


def check_demand_names(
    demand: DemandChange,
    tenants: Sequence[str],
    classes: Sequence[str],
    *,
    source: str,
    where: str,
) -> None:
    for kind, table, known in (
        ("tenant", demand.tenants, tenants),
        ("request class", demand.classes, classes),
    ):
        for name in table:
            if name not in known:
                key = "tenants" if kind == "tenant" else "classes"
                raise InputError(
                    f"unknown {kind} {name!r}",
                    source=source,
                    field=f"{where}.demand.{key}.{name}",
                    expected="one of " + ", ".join(sorted(known)),
                )


def _duplicate(r: Request, arrival_s: float, copy_index: int) -> Request:
    hashes = r.block_hashes
    if hashes:
        last = hash((hashes[-1], copy_index, "whatif-copy")) & _HASH_MASK
        hashes = (*hashes[:-1], last)
    return r.unserved(arrival_s=arrival_s, block_hashes=hashes)


def scale_demand(requests: Sequence[Request], demand: DemandChange, *, seed: int) -> list[Request]:
    """Requests thinned or duplicated by their multipliers, in arrival order, re-numbered."""
    if demand.is_identity:
        return [r.unserved() for r in requests]
    rng = np.random.default_rng([seed, _DEMAND_SEED])
    keep_draw = rng.random(len(requests))
    jitter = rng.random(len(requests))
    out: list[Request] = []
    for r, u, j in zip(requests, keep_draw.tolist(), jitter.tolist(), strict=True):
        m = (
            demand.all
            * demand.tenants.get(r.tenant, 1.0)
            * demand.classes.get(r.request_class, 1.0)
        )
        whole = math.floor(m)
        copies = whole + (1 if u < m - whole else 0)
        for k in range(copies):
            # copies spread over the jitter window by the golden ratio, never on top of each other
            offset = ((j + 0.618 * (k - 1)) % 1.0) * DUPLICATE_JITTER_S + 1e-6 * k
            out.append(r.unserved() if k == 0 else _duplicate(r, r.arrival_s + offset, k))
    out.sort(key=lambda q: q.arrival_s)
    for i, q in enumerate(out):
        q.id = i
    return out
