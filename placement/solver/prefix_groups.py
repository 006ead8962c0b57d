"""Prefix groups: the hot nodes of the traffic-weighted trie of block hashes.

Block hashes chain their parent's, so one hash names a whole prefix: the trie needs no
explicit paths, only per node (hash) its request count, its depth and its parent. Tries are
kept per (tenant, model), because a group is placed for one tenant's traffic to one model.

**The rule.** With ``n(v)`` the requests passing node ``v`` in the window and
``tokens(v) = depth(v) · block_tokens`` its prefix length, a node is *hot* when

* ``n(v) ≥ min_requests`` (a prefix seen once is never shared), and
* its *saved prefill* ``n(v) / window · tokens(v)`` (tokens/s a warm cache would skip) is at
  least ``min_saved_share`` of the scope's prompt tokens/s.

A hot node is a **group** unless one of its hot children still carries at least
``follow_share`` of its traffic: then the deeper child stands for it (placing the child warms
the parent's prefix too, and most of the parent's traffic goes on to the child). Following such
chains down, the deepest node that still carries most of its parent's traffic is the group; a
branching point whose children each take a minority is itself a group, and the hot children
below it may be groups again (nested groups: the route path matches the deepest).

Each request then belongs to the deepest group on its chain, or to no group (its tenant's
default route). When more than ``max_groups`` qualify, the highest saved prefill win.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

MIN_REQUESTS = 2
MIN_SAVED_SHARE = 0.002
FOLLOW_SHARE = 0.5


class BlockHashed(Protocol):
    """What the trie reads from a request (``Request`` has it)."""

    @property
    def tenant(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def block_hashes(self) -> tuple[int, ...]: ...
    @property
    def input_tokens(self) -> int: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupRule:
    """Parameters of the hot-node rule (see the module docstring)."""

    min_requests: int = MIN_REQUESTS
    min_saved_share: float = MIN_SAVED_SHARE
    follow_share: float = FOLLOW_SHARE
    max_groups: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PrefixGroup:
    """A trie node chosen for placement; ``key`` is the hash of its deepest block."""

    tenant: str
    model: str
    key: int
    depth_blocks: int
    requests: int  # requests passing the node (its own and its nested groups')


@dataclass(slots=True)
class _Trie:
    count: dict[int, int]
    depth: dict[int, int]
    children: dict[int, list[int]]
    prompt_tokens: int


def _build_tries(requests: Iterable[BlockHashed]) -> dict[tuple[str, str], _Trie]:
    tries: dict[tuple[str, str], _Trie] = {}
    for r in requests:
        scope = (r.tenant, r.model)
        trie = tries.get(scope)
        if trie is None:
            trie = tries[scope] = _Trie({}, {}, defaultdict(list), 0)
        trie.prompt_tokens += r.input_tokens
        count, depth, children = trie.count, trie.depth, trie.children
        parent = -1
        for d, h in enumerate(r.block_hashes, start=1):
            n = count.get(h)
            if n is None:
                count[h] = 1
                depth[h] = d
                children[parent].append(h)
            else:
                count[h] = n + 1
            parent = h
    return tries


DEFAULT_RULE = GroupRule()


def find_groups(
    requests: Sequence[BlockHashed],
    *,
    window_s: float,
    block_tokens: int,
    rule: GroupRule = DEFAULT_RULE,
) -> list[PrefixGroup]:
    """The prefix groups of a window of requests (see the module docstring for the rule)."""
    window = max(window_s, 1e-9)
    groups: list[tuple[float, PrefixGroup]] = []
    for (tenant, model), trie in _build_tries(requests).items():
        min_saved = rule.min_saved_share * trie.prompt_tokens / window

        def hot(h: int, trie: _Trie = trie, min_saved: float = min_saved) -> bool:
            n = trie.count[h]
            saved = n / window * trie.depth[h] * block_tokens
            return n >= rule.min_requests and saved >= min_saved

        for h, n in trie.count.items():
            if not hot(h):
                continue
            followed = any(
                trie.count[c] >= rule.follow_share * n and hot(c) for c in trie.children.get(h, ())
            )
            if followed:
                continue
            saved = n / window * trie.depth[h] * block_tokens
            group = PrefixGroup(
                tenant=tenant, model=model, key=h, depth_blocks=trie.depth[h], requests=n
            )
            groups.append((saved, group))
    groups.sort(key=lambda sg: (-sg[0], sg[1].key))
    if rule.max_groups is not None:
        groups = groups[: rule.max_groups]
    return [g for _, g in groups]


def assign_groups(
    requests: Sequence[BlockHashed], groups: Sequence[PrefixGroup]
) -> list[PrefixGroup | None]:
    """Each request's deepest group on its chain (``None``: no group, the default route)."""
    by_scope_key = {(g.tenant, g.model, g.key): g for g in groups}
    out: list[PrefixGroup | None] = []
    for r in requests:
        found = None
        for h in reversed(r.block_hashes):
            found = by_scope_key.get((r.tenant, r.model, h))
            if found is not None:
                break
        out.append(found)
    return out
