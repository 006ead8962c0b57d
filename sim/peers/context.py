"""What a peer policy is built from: a seed, the prefix block size, and per-policy settings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from placement.errors import InputError

DEFAULT_BLOCK_TOKENS = 512  # the Mooncake trace's prefix block size


S = TypeVar("S")


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyContext:
    """Inputs shared by the policy factories.

    ``seed`` makes every random choice reproducible; ``block_tokens`` is the size in tokens of
    one prefix block (the unit of ``Request.block_hashes``, and of the per-replica prefix
    indexes, whose capacity is a replica's KV capacity over it). ``settings`` holds per-policy
    settings keyed by policy name, each of the type its policy owns (``{"chbl":
    ChblConfig(epsilon=0.5)}``); a factory reads only its own, and a policy with no entry
    runs with its published defaults.
    """

    seed: int
    block_tokens: int = DEFAULT_BLOCK_TOKENS
    settings: Mapping[str, object] = field(default_factory=dict)

    def settings_for(self, policy: str, kind: type[S]) -> S:
        """``settings[policy]`` when given (it must be a ``kind``), else ``kind()``."""
        given = self.settings.get(policy)
        if given is None:
            return kind()
        if not isinstance(given, kind):
            raise InputError(
                f"got {type(given).__name__}",
                field=f"settings.{policy}",
                expected=f"a {kind.__name__}",
            )
        return given

    def __post_init__(self) -> None:
        if self.block_tokens < 1:
            raise InputError(
                f"got {self.block_tokens}", field="block_tokens", expected="an integer >= 1"
            )
