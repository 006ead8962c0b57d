"""The demand window: the recent requests the planner solves for.

The route path records one plain tuple per decision (cheaper to build than a request object,
and far cheaper to pickle: 50,000 requests pickle in ~0.1 s as tuples, ~1 s as objects). A
solve takes a :meth:`DemandWindow.snapshot` on the event loop (a list copy, ~1 ms for 50,000),
:func:`encode_demand` turns it into pickled chunks in a thread (each chunk small, so no single
``pickle.dumps`` holds the GIL for more than a few milliseconds while the route path waits),
and the worker process decodes them with :func:`decode_demand` and builds the solver instance
there: nothing proportional to the window runs on the event loop.
"""

from __future__ import annotations

import json
import pickle
from collections import deque
from collections.abc import Sequence

from placement.domain.requests import Request
from serving.route.types import RouteQuery

# tenant, model, request class, block hashes, input tokens, max output tokens, arrival (s)
DemandRow = tuple[str, str, str, tuple[int, ...], int, int, float]
CHUNK_ROWS = 2_000  # ~4 ms of pickling per chunk


class DemandWindow:
    """The last ``size`` routed requests, oldest first."""

    def __init__(self, size: int) -> None:
        self._rows: deque[DemandRow] = deque(maxlen=size)
        self.recorded = 0  # rows ever recorded (a cursor for :meth:`since`)

    def record(self, query: RouteQuery, now: float) -> None:
        self.recorded += 1
        self._rows.append(
            (
                query.tenant,
                query.model,
                query.request_class,
                query.block_hashes,
                query.input_tokens,
                query.max_output_tokens,
                now,
            )
        )

    def since(self, cursor: int) -> list[DemandRow]:
        """The rows recorded after ``cursor`` (a past :attr:`recorded`) still in the window."""
        new = min(self.recorded - cursor, len(self._rows))
        if new <= 0:
            return []
        return [self._rows[i] for i in range(len(self._rows) - new, len(self._rows))]

    def snapshot(self) -> list[DemandRow]:
        """The window as of now (a copy the route path can keep appending behind)."""
        return list(self._rows)

    def __len__(self) -> int:
        return len(self._rows)


def encode_demand(rows: Sequence[DemandRow], *, chunk_rows: int = CHUNK_ROWS) -> list[bytes]:
    """``rows`` as pickled chunks of ``chunk_rows`` (run it in a thread, not on the loop)."""
    return [
        pickle.dumps(list(rows[i : i + chunk_rows]), protocol=pickle.HIGHEST_PROTOCOL)
        for i in range(0, len(rows), chunk_rows)
    ]


def shared_chunk(rows: Sequence[DemandRow], *, clock_offset_s: float) -> bytes:
    """``rows`` as one JSON chunk for the demand other processes read (:mod:`serving.shared`),
    times moved to Unix seconds by ``clock_offset_s`` (each process has its own clock)."""
    return json.dumps(
        [(t, m, c, list(h), i, o, at + clock_offset_s) for t, m, c, h, i, o, at in rows],
        separators=(",", ":"),
    ).encode()


def rows_of_shared(chunks: Sequence[bytes], *, limit: int) -> list[DemandRow]:
    """The newest ``limit`` rows of :func:`shared_chunk`'s chunks, oldest first (in a
    thread: a chunk another process wrote is data, so it is JSON, never unpickled)."""
    rows: list[DemandRow] = []
    for chunk in chunks:
        for t, m, c, h, i, o, at in json.loads(chunk):
            rows.append((str(t), str(m), str(c), tuple(int(x) for x in h), int(i), int(o), at))
    rows.sort(key=lambda r: r[6])
    return rows[-limit:] if limit > 0 else rows


def decode_demand(chunks: Sequence[bytes]) -> list[Request]:
    """The requests of :func:`encode_demand`'s chunks, in order (in the worker process)."""
    out: list[Request] = []
    for chunk in chunks:
        for tenant, model, request_class, hashes, input_tokens, output_tokens, at in pickle.loads(
            chunk
        ):
            out.append(
                Request(
                    len(out) + 1,
                    at,
                    input_tokens,
                    output_tokens,
                    tenant=tenant,
                    request_class=request_class,
                    model=model,
                    block_hashes=hashes,
                )
            )
    return out
