"""Server-Sent Events passed through as they arrive, event by event.

:class:`EventRelay` is fed the raw bytes read from a replica and returns what can go to the
client now: every complete event (ending in a blank line) received so far; a partial event
waits for the rest of its bytes, never for anything more. On the way it reads the token counts
of the usage event and, when the gateway asked for that event on the client's behalf, takes it
out. Reading usage is a byte search, not a JSON parse of each event.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

EVENT_END = b"\n\n"
USAGE = b'"usage":'
DONE = b"data: [DONE]"
_PROMPT = re.compile(rb'"prompt_tokens":\s*(\d+)')
_COMPLETION = re.compile(rb'"completion_tokens":\s*(\d+)')
_CACHED = re.compile(rb'"cached_tokens":\s*(\d+)')
_NO_CHOICES = re.compile(rb'"choices":\s*\[\s*\]')


@dataclass(slots=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0


def read_usage(data: bytes) -> Usage | None:
    """The token counts of a response body or event, when it carries them."""
    completion = _COMPLETION.search(data)
    if completion is None:
        return None
    prompt = _PROMPT.search(data)
    cached = _CACHED.search(data)
    return Usage(
        prompt_tokens=int(prompt.group(1)) if prompt else 0,
        completion_tokens=int(completion.group(1)),
        cached_tokens=int(cached.group(1)) if cached else 0,
    )


class EventRelay:
    def __init__(self, *, strip_usage: bool) -> None:
        self.strip_usage = strip_usage
        self.usage: Usage | None = None
        self.events = 0  # data events forwarded (a token count when no usage comes)
        self.done = False  # the [DONE] event went through
        self._tail = b""

    def feed(self, chunk: bytes) -> bytes:
        """Bytes to forward now, given ``chunk`` just read."""
        data = self._tail + chunk if self._tail else chunk
        cut = data.rfind(EVENT_END)
        if cut < 0:
            self._tail = data
            return b""
        ready = data[: cut + 2]
        self._tail = data[cut + 2 :]
        if USAGE in ready:
            ready = self._read_usage(ready)
        self.events += ready.count(b"data:")
        if DONE in ready:
            self.done = True
        return ready

    def rest(self) -> bytes:
        """What is left when the stream ends (an event without its blank line)."""
        tail, self._tail = self._tail, b""
        return tail

    def _read_usage(self, ready: bytes) -> bytes:
        kept: list[bytes] = []
        for event in ready.split(EVENT_END)[:-1]:
            usage = read_usage(event) if USAGE in event else None
            if usage is not None:
                self.usage = usage
                if self.strip_usage and _NO_CHOICES.search(event):
                    continue  # the usage-only event the client did not ask for
            kept.append(event + EVENT_END)
        return b"".join(kept)
