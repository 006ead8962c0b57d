"""Synthetic multi-tenant traffic with shared system prompts, hot prefixes and multi-turn sessions.

The model, per tenant ``i`` (named ``tenant-<i>``, 0 the busiest):

* **Traffic share** ∝ ``(i + 1) ** -skew`` (Zipf over tenants) of ``rate_rps`` requests/s,
  counting follow-up turns. **Credit share** ∝ ``traffic_share ** credit_damping`` (normalised):
  with the default 0.5 the busiest tenants demand more than their credit and the tail less.
* **Class**: a fraction ``batch_tenants`` of the tenants (picked at random) is ``batch``; the rest
  is ``interactive``. Batch sessions are one-shot (a single turn over a document); interactive
  sessions have a geometric number of turns with mean ``session_turns_mean``.
* **Prompts**: each tenant owns 1–3 system prompts (``prompts_per_tenant``); ``hot_keys`` more
  prompts are shared by all tenants. Each prompt's length is log-uniform in
  ``system_prompt_tokens``. A session opens with a hot prompt with probability ``hot_share``
  (uniform over the hot keys), else with one of its tenant's prompts (uniform).
* **Sessions** arrive as a Poisson process per tenant at ``tenant rate / mean turns``. Turn ``k``
  arrives an exponential think time (mean ``think_time_s``) after turn ``k-1`` — measured between
  arrivals, since response times are unknown before simulation. Its prompt is turn ``k-1``'s
  prompt + turn ``k-1``'s output + new user text, so it extends turn ``k-1``'s block hashes.
  A session ends early when its prompt would exceed ``max_context_tokens``.
* **Lengths** are lognormal, clipped, with the medians/σ of :data:`LENGTHS` (user text and output
  per class). Sessions start ``warmup`` seconds before 0 so the rate is stationary from t = 0.

Block hashes: block ``j`` of a session lies either wholly inside its system prompt (content id
of the prompt's block ``j``, shared by every session using that prompt) or not (a content id
unique to the session). Chaining these ids with
:func:`placement.domain.prefix.chain_block_ids` gives
exactly "share the first k hashes ⇔ share the first k blocks". Only full blocks are hashed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from placement.domain.prefix import chain_block_ids
from placement.domain.requests import Tenant
from placement.errors import InputError
from sim.workloads.assemble import assemble
from sim.workloads.base import Workload

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
_Numbers = TypeVar("_Numbers", IntArray, FloatArray)
CLASSES = ("interactive", "batch")
_ID_SPACE = 1 << 32  # content ids: owner * 2**32 + block index (owners: prompts, then sessions)
# A session's span beyond its first turn exceeds the warm-up with probability 1e-3.
_WARMUP_TAIL = math.log(1000.0)


@dataclass(frozen=True, slots=True)
class Lognormal:
    """A clipped lognormal length distribution in tokens."""

    median: float
    sigma: float
    low: int
    high: int

    def sample(self, rng: np.random.Generator, n: int) -> IntArray:
        x = rng.lognormal(math.log(self.median), self.sigma, n)
        return np.clip(np.rint(x), self.low, self.high).astype(np.int64)


# (user text, output) per class. Interactive: chat turns of a few hundred tokens, answers a bit
# longer; batch: one document (~1.2k tokens median) and a longer generated summary/extraction.
LENGTHS: dict[str, tuple[Lognormal, Lognormal]] = {
    "interactive": (Lognormal(150, 1.0, 1, 16384), Lognormal(200, 0.9, 1, 8192)),
    "batch": (Lognormal(1200, 0.8, 1, 16384), Lognormal(500, 0.7, 1, 8192)),
}


def synthetic_tenants(
    *,
    duration_s: float,
    rate_rps: float,
    seed: int,
    tenants: int = 8,
    skew: float = 1.2,
    system_prompt_tokens: tuple[int, int] = (256, 4096),
    prompts_per_tenant: tuple[int, int] = (1, 3),
    hot_keys: int = 4,
    hot_share: float = 0.3,
    session_turns_mean: float = 4.0,
    think_time_s: float = 20.0,
    block_tokens: int = 512,
    batch_tenants: float = 0.25,
    credit_damping: float = 0.5,
    max_context_tokens: int = 32768,
) -> Workload:
    """A synthetic multi-tenant workload over ``[0, duration_s)``; deterministic for ``seed``.

    ``rate_rps`` counts every request (first and follow-up turns). See the module docstring for
    the model and :data:`LENGTHS` for the length distributions.
    """
    _check(
        seed=seed,
        duration_s=duration_s,
        rate_rps=rate_rps,
        tenants=tenants,
        skew=skew,
        system_prompt_tokens=system_prompt_tokens,
        prompts_per_tenant=prompts_per_tenant,
        hot_keys=hot_keys,
        hot_share=hot_share,
        session_turns_mean=session_turns_mean,
        think_time_s=think_time_s,
        block_tokens=block_tokens,
        batch_tenants=batch_tenants,
        max_context_tokens=max_context_tokens,
        credit_damping=credit_damping,
    )
    rng = np.random.default_rng(seed)
    traffic = np.arange(1, tenants + 1, dtype=np.float64) ** -skew
    traffic /= traffic.sum()
    credit = traffic**credit_damping
    credit /= credit.sum()
    is_batch = np.zeros(tenants, dtype=bool)
    is_batch[rng.permutation(tenants)[: round(batch_tenants * tenants)]] = True

    # Prompts 0..hot_keys-1 are the hot keys; then each tenant's own.
    own_counts = rng.integers(prompts_per_tenant[0], prompts_per_tenant[1] + 1, tenants)
    lo, hi = system_prompt_tokens
    prompt_tokens = np.rint(
        np.exp(rng.uniform(math.log(lo), math.log(hi), hot_keys + int(own_counts.sum())))
    ).astype(np.int64)
    own_first = hot_keys + np.concatenate(([0], np.cumsum(own_counts)[:-1]))

    turns = _Turns.sample(
        rng,
        traffic=traffic * rate_rps,
        is_batch=is_batch,
        duration_s=duration_s,
        turns_mean=session_turns_mean,
        think_time_s=think_time_s,
    )
    hot = rng.random(turns.sessions) < hot_share if hot_keys else np.zeros(turns.sessions, bool)
    session_prompt = np.where(
        hot,
        rng.integers(0, max(hot_keys, 1), turns.sessions),
        own_first[turns.session_tenant]
        + np.floor(rng.random(turns.sessions) * own_counts[turns.session_tenant]).astype(np.int64),
    )
    turns.sample_lengths(rng, is_batch, prompt_tokens[session_prompt], max_context_tokens)
    hashes = _block_hashes(turns, session_prompt, prompt_tokens, block_tokens)

    keep = turns.arrival_s >= 0.0
    names = [f"tenant-{i}" for i in range(tenants)]
    return assemble(
        "synthetic",
        arrival_s=turns.arrival_s[keep],
        input_tokens=turns.input_tokens[keep],
        output_tokens=turns.output_tokens[keep],
        tenant_index=turns.session_tenant[turns.session][keep],
        tenant_names=names,
        class_index=is_batch[turns.session_tenant[turns.session]][keep].astype(np.int64),
        class_names=CLASSES,
        tenants={
            n: Tenant(name=n, credit_share=float(c)) for n, c in zip(names, credit, strict=True)
        },
        block_hashes=[h for h, k in zip(hashes, keep.tolist(), strict=True) if k],
        block_tokens=block_tokens,
    )


@dataclass
class _Turns:
    """Every turn of every session, flattened; turns of a session are contiguous and in order."""

    session_tenant: IntArray  # per session
    session: IntArray  # per turn: its session
    first_turn: npt.NDArray[np.bool_]  # per turn
    arrival_s: FloatArray  # per turn
    input_tokens: IntArray
    output_tokens: IntArray

    @property
    def sessions(self) -> int:
        return int(self.session_tenant.size)

    @classmethod
    def sample(
        cls,
        rng: np.random.Generator,
        *,
        traffic: FloatArray,
        is_batch: npt.NDArray[np.bool_],
        duration_s: float,
        turns_mean: float,
        think_time_s: float,
    ) -> _Turns:
        """Session starts and turn times, truncated at ``duration_s``."""
        mean_turns = np.where(is_batch, 1.0, turns_mean)
        warmup = 0.0 if turns_mean <= 1 else think_time_s * turns_mean * _WARMUP_TAIL
        counts = rng.poisson(traffic / mean_turns * (duration_s + warmup))
        session_tenant = np.repeat(np.arange(traffic.size), counts)
        starts = rng.uniform(-warmup, duration_s, session_tenant.size)
        n_turns = np.where(
            is_batch[session_tenant], 1, rng.geometric(1.0 / turns_mean, session_tenant.size)
        ).astype(np.int64)
        session = np.repeat(np.arange(session_tenant.size), n_turns)
        first_turn = np.ones(session.size, dtype=bool)
        first_turn[1:] = session[1:] != session[:-1]
        think = np.where(first_turn, 0.0, rng.exponential(think_time_s, session.size))
        arrival_s = starts[session] + _cumsum_by_session(think, first_turn)
        inside = arrival_s < duration_s
        # Drop sessions that end before 0 entirely: they cannot reach the window.
        alive_session = np.zeros(session_tenant.size, dtype=bool)
        if session.size:
            last_arrival = np.maximum.reduceat(
                np.where(inside, arrival_s, -np.inf), np.flatnonzero(first_turn)
            )
            alive_session = last_arrival >= 0.0
        keep = inside & alive_session[session]
        session_tenant_kept, session_kept = _renumber(session_tenant, session[keep], alive_session)
        first_kept = np.ones(session_kept.size, dtype=bool)
        first_kept[1:] = session_kept[1:] != session_kept[:-1]
        return cls(
            session_tenant=session_tenant_kept,
            session=session_kept,
            first_turn=first_kept,
            arrival_s=arrival_s[keep],
            input_tokens=np.empty(0, dtype=np.int64),
            output_tokens=np.empty(0, dtype=np.int64),
        )

    def sample_lengths(
        self,
        rng: np.random.Generator,
        is_batch: npt.NDArray[np.bool_],
        session_prompt_tokens: IntArray,
        max_context_tokens: int,
    ) -> None:
        """Input/output tokens per turn; drops turns whose prompt outgrows the context."""
        n = self.session.size
        batch_turn = is_batch[self.session_tenant[self.session]]
        user = np.empty(n, dtype=np.int64)
        output = np.empty(n, dtype=np.int64)
        for name, mask in (("interactive", ~batch_turn), ("batch", batch_turn)):
            user_dist, output_dist = LENGTHS[name]
            user[mask] = user_dist.sample(rng, int(mask.sum()))
            output[mask] = output_dist.sample(rng, int(mask.sum()))
        previous_output = np.concatenate(([0], output[:-1]))
        growth = user + np.where(
            self.first_turn, session_prompt_tokens[self.session], previous_output
        )
        input_tokens = _cumsum_by_session(growth, self.first_turn)
        fits = input_tokens <= max_context_tokens  # prompts only grow within a session
        self.session = self.session[fits]
        self.first_turn = self.first_turn[fits]
        self.arrival_s = self.arrival_s[fits]
        self.input_tokens = input_tokens[fits]
        self.output_tokens = output[fits]


def _cumsum_by_session(values: _Numbers, first_turn: npt.NDArray[np.bool_]) -> _Numbers:
    """Cumulative sums restarting at every first turn (turns of a session are contiguous)."""
    total = np.cumsum(values)
    if total.size == 0:
        return total
    starts = np.flatnonzero(first_turn)
    before = total[starts] - values[starts]
    lengths = np.diff(np.append(starts, total.size))
    result: _Numbers = total - np.repeat(before, lengths)
    return result


def _renumber(
    session_tenant: IntArray, kept_session: IntArray, alive: npt.NDArray[np.bool_]
) -> tuple[IntArray, IntArray]:
    """Session ids renumbered 0.. over the surviving sessions."""
    new_id = np.cumsum(alive) - 1
    return session_tenant[alive], new_id[kept_session]


def _block_hashes(
    turns: _Turns, session_prompt: IntArray, prompt_tokens: IntArray, block_tokens: int
) -> list[tuple[int, ...]]:
    """Each turn's chained hashes of its full blocks; later turns extend earlier ones."""
    prompt_hashes: dict[int, tuple[int, ...]] = {}
    out: list[tuple[int, ...]] = []
    owners = int(prompt_tokens.size)
    current: tuple[int, ...] = ()
    own_base = 0
    for session, first, n_in in zip(
        turns.session.tolist(),
        turns.first_turn.tolist(),
        turns.input_tokens.tolist(),
        strict=True,
    ):
        if first:
            prompt = int(session_prompt[session])
            if prompt not in prompt_hashes:
                full = int(prompt_tokens[prompt]) // block_tokens
                base = prompt * _ID_SPACE
                prompt_hashes[prompt] = chain_block_ids(range(base, base + full))
            current = prompt_hashes[prompt]
            own_base = (owners + session) * _ID_SPACE
        full = n_in // block_tokens
        if full > len(current):
            new_ids = range(own_base + len(current), own_base + full)
            extension = (
                chain_block_ids(new_ids, root=current[-1]) if current else chain_block_ids(new_ids)
            )
            current = current + extension
        out.append(current)
    return out


def _check(
    *,
    seed: int,
    duration_s: float,
    rate_rps: float,
    tenants: int,
    skew: float,
    system_prompt_tokens: tuple[int, int],
    prompts_per_tenant: tuple[int, int],
    hot_keys: int,
    hot_share: float,
    session_turns_mean: float,
    think_time_s: float,
    block_tokens: int,
    batch_tenants: float,
    max_context_tokens: int,
    credit_damping: float,
) -> None:
    rules = (
        ("seed", seed >= 0, ">= 0"),
        ("duration_s", duration_s > 0, "> 0"),
        ("rate_rps", rate_rps > 0, "> 0"),
        ("tenants", tenants >= 1, ">= 1"),
        ("skew", skew >= 0, ">= 0"),
        (
            "system_prompt_tokens",
            1 <= system_prompt_tokens[0] <= system_prompt_tokens[1],
            "1 <= low <= high",
        ),
        (
            "prompts_per_tenant",
            1 <= prompts_per_tenant[0] <= prompts_per_tenant[1],
            "1 <= low <= high",
        ),
        ("hot_keys", hot_keys >= 0, ">= 0"),
        (
            "hot_share",
            0 <= hot_share <= 1 and (hot_keys > 0 or hot_share == 0),
            "in [0, 1], and 0 when hot_keys is 0",
        ),
        ("session_turns_mean", session_turns_mean >= 1, ">= 1"),
        ("think_time_s", think_time_s >= 0, ">= 0"),
        ("block_tokens", block_tokens >= 1, ">= 1"),
        ("batch_tenants", 0 <= batch_tenants <= 1, "in [0, 1]"),
        ("credit_damping", 0 <= credit_damping <= 1, "in [0, 1]"),
        (
            "max_context_tokens",
            max_context_tokens >= system_prompt_tokens[1] + 1,
            "> the longest system prompt",
        ),
    )
    for name, ok, expected in rules:
        if not ok:
            raise InputError("invalid synthetic workload parameter", field=name, expected=expected)
