"""Which request classes each replica serves, where a prompt chunk breaks a class's TPOT.

With chunked prefill every iteration a request decodes in may also carry a chunk of the
prompts queued on its replica. On a kind whose *full-chunk* iteration (a whole token budget of
prompt, :meth:`models.roofline_prior.KindRoofline.full_chunk_s`) is slower than a class's TPOT
SLO — an A100 or L40S serving Llama-3-8B, 137 / 150 ms, against the interactive 100 ms — that
class's decodes meet their TPOT only while the replica's prompt load stays light; on a kind
whose full chunk is faster (an H100: 47 ms) they meet it under any prompt load. A class whose
TPOT SLO is looser than every kind's full chunk (``batch``, 300 ms) meets it anywhere.

The capacity tables price each class alone and do not see this: past the knee the route path
pushed the loose class's long prompts (``batch``: ~3,000-token documents) off the busy fast
replicas onto the slow ones, where they broke the tight decodes' TPOT, while its prompts on the
fast replicas took the prefill the tight class had no other place to get (bench/RESULTS.md,
issue 14, synthetic over the heterogeneous fleet).

So when the demand of the classes tight on the slow kinds overflows the kinds that hold every
class's TPOT (its replicas needed there, at capacity at SLO, exceed theirs), the plan keeps
those fast kinds for the tight classes, and the loose classes go to the slow kinds, which
serve every class. With no slow kind that can serve the loose classes, no loose or no tight
demand in the window, or no fast kind, nothing is split.

Tried and not kept: splitting the slow kinds' replicas too, between the loose classes and the
tight ones in proportion to the replicas each side's demand fills there (the tight decodes
then never share iterations with batch prompts): +19% goodput on the head of ``synthetic`` at
load 3, but the capacity tables undervalue batch on the L40S against interactive, so batch was
starved (attainment 0.48 / 0.29 at loads 3 / 4) and load 2 lost 1–4% (bench/RESULTS.md).
"""

from __future__ import annotations

import dataclasses
import math
from functools import lru_cache

import numpy as np

from placement.solver.instance import BoolArray, FloatArray, Instance, IntArray


@lru_cache(maxsize=64)
def full_chunk_step_s(accelerator: str, model: str, tp: int) -> float:
    """One iteration that prefills a full token budget on the kind (the roofline prior's);
    0 (never slower than a TPOT SLO) for a kind the catalogue does not know."""
    from models.capacity import replica_kind  # heavy import, only when a kind is first seen
    from models.roofline_prior import kind_roofline
    from placement.errors import PlacementError

    try:
        return kind_roofline(replica_kind(accelerator, model, max(tp, 1))).full_chunk_s()
    except PlacementError:
        return 0.0


def kind_full_chunk_steps(inst: Instance) -> FloatArray:
    """Per replica kind of ``inst``, its full-chunk step (seconds)."""
    model_of = {
        int(k): inst.models[int(m)]
        for k, m in zip(inst.replica_kind, inst.replica_model, strict=True)
    }
    return np.asarray(
        [
            full_chunk_step_s(acc, model_of.get(k, ""), int(inst.kind_tp[k]))
            for k, acc in enumerate(inst.kind_accelerator)
        ],
        dtype=np.float64,
    )


def split_classes(inst: Instance, full_step_s: FloatArray | None = None) -> BoolArray:
    """``serves[r, c]``: whether replica ``r`` may serve class ``c`` (see the module);
    ``full_step_s`` per kind (default :func:`kind_full_chunk_steps`)."""
    steps = kind_full_chunk_steps(inst) if full_step_s is None else full_step_s
    serves = np.ones((inst.n_replicas, len(inst.classes)), dtype=np.bool_)
    tpot = np.asarray([s.tpot_p95_s for s in inst.class_slo], dtype=np.float64)
    breaks = steps[:, None] > tpot[None, :]  # [kind, class]: a full chunk breaks its TPOT
    for m in range(len(inst.models)):
        pool = np.flatnonzero((inst.replica_model == m) & inst.replica_healthy)
        units = np.flatnonzero((inst.unit_model == m) & (inst.unit_rate > 0))
        if len(pool) == 0 or len(units) == 0:
            continue
        kinds = inst.replica_kind[pool]
        slow = breaks[kinds].any(axis=1)
        # the classes some kind of the pool breaks; the rest meet their TPOT everywhere
        tight: BoolArray = np.asarray(breaks[kinds].any(axis=0), dtype=np.bool_)
        is_tight = tight[inst.unit_class[units]]
        if slow.all() or not slow.any() or is_tight.all() or not is_tight.any():
            continue
        loose_units = units[~is_tight]
        if any(
            not math.isfinite(_replicas_needed(inst, loose_units, k))
            for k in np.unique(kinds[slow]).tolist()
        ):
            continue  # a slow kind cannot serve the loose classes: they keep the fast kinds
        # the share of the tight demand the fast replicas hold at capacity at SLO
        held = sum(1.0 / _replicas_needed(inst, units[is_tight], k) for k in kinds[~slow].tolist())
        if held < 1.0:
            serves[pool[~slow]] = tight
    return serves


def _replicas_needed(inst: Instance, units: IntArray, kind: int) -> float:
    """Replicas of ``kind`` that ``units``' whole demand fills at their capacity at SLO
    (inf when the kind serves none of it)."""
    cap = inst.capacity[units, kind]
    ok = cap > 0
    if not ok.any():
        return math.inf
    return float((inst.unit_rate[units][ok] / cap[ok]).sum())


def with_class_split(inst: Instance) -> Instance:
    """``inst`` with :attr:`Instance.replica_classes` split (see the module)."""
    return dataclasses.replace(inst, replica_classes=split_classes(inst))


__all__ = [
    "full_chunk_step_s",
    "kind_full_chunk_steps",
    "split_classes",
    "with_class_split",
]
