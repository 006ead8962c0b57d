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

    def record(self, query: RouteQuery, now: float) -> None:
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
