"""Answers to deterministic requests, kept in memory up to a number of bytes (LRU).

A request with temperature 0 gets the same answer every time, so the gateway can give it again
without a replica. Only whole, successful answers are kept: a JSON body, or every byte of an
event stream that ended with ``[DONE]``. An entry larger than an eighth of the budget is not
kept (it would flush everything else).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

ENTRY_OVERHEAD_BYTES = 200  # the key, the record and the dict slot, roughly


@dataclass(frozen=True, slots=True)
class CachedAnswer:
    content_type: str
    body: bytes
    input_tokens: int
    output_tokens: int

    @property
    def size(self) -> int:
        return len(self.body) + ENTRY_OVERHEAD_BYTES


class ResultCache:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[bytes, CachedAnswer] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def hit_ratio(self) -> float:
        asked = self.hits + self.misses
        return self.hits / asked if asked else 0.0

    def get(self, key: bytes) -> CachedAnswer | None:
        answer = self._entries.get(key)
        if answer is None:
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return answer

    def put(self, key: bytes, answer: CachedAnswer) -> bool:
        """Keep ``answer``, evicting the least recently used; False when it is too large."""
        size = answer.size
        if size > self.max_bytes // 8:
            return False
        old = self._entries.pop(key, None)
        if old is not None:
            self.bytes -= old.size
        while self._entries and self.bytes + size > self.max_bytes:
            _, evicted = self._entries.popitem(last=False)
            self.bytes -= evicted.size
        self._entries[key] = answer
        self.bytes += size
        return True
