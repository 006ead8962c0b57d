"""How many tokens a response carried, read from the bytes passing through the picker.

The last ``"completion_tokens": N`` in the body wins (a JSON response's ``usage``, or the
``usage`` of a stream's last chunk when the client asked for it); failing that, a stream counts
one token per Server-Sent Event (``data:`` lines, ``[DONE]`` excluded); failing that, the
caller's default. Only a short tail of the body is kept, whatever its length.
"""

from __future__ import annotations

import re

_USAGE = re.compile(rb'"completion_tokens"\s*:\s*(\d+)')
_TAIL_BYTES = 64  # enough to hold a usage field split across two chunks


class OutputTokens:
    def __init__(self) -> None:
        self._tail = b""
        self._usage: int | None = None
        self._events = 0

    def feed(self, chunk: bytes) -> None:
        window = self._tail + chunk
        matches = _USAGE.findall(window)
        if matches:
            self._usage = int(matches[-1])
        self._events += chunk.count(b"data:") - chunk.count(b"data: [DONE]")
        self._tail = window[-_TAIL_BYTES:]

    def tokens(self, default: int) -> int:
        if self._usage is not None:
            return self._usage
        if self._events > 0:
            return self._events
        return default
