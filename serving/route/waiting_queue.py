"""The scraped waiting queue in prompt tokens, as the router prices it.

The route path's queue signal (:func:`serving.route.plugins.base.queued_prefill_tokens`) is the
larger of two counts of the prompt tokens ahead of a new request on a replica: the router's
own (``in_flight_prefill_tokens``: the whole prompts it dispatched there that have no first
token yet) and the replica's scraped ``num_requests_waiting`` at so many tokens a request. The
scrape covers what the router's own count does not (other routers' requests, a restart); the
gauge does not say how long the waiting prompts are.

- **Price** (``waiting.price: dispatched`` in the route profile): a waiting request counts at
  the mean uncached prompt tokens of the requests the router recently dispatched to that
  replica (:func:`price_dispatch`: a running mean over the first :data:`PRICE_WINDOW`
  dispatches, then a moving average of weight ``1 / PRICE_WINDOW``), and at
  :data:`~models.roofline_prior.QUEUED_PROMPT_TOKENS` (a chat turn, 1,024) until it has sent
  it anything. ``constant``: always that constant (the prior's own queue rule). On a traffic
  of short prompts (``multi-model``: ~50–170 tokens) the constant prices a waiting request
  6–20× too high; on long documents too low.
- **Since the scrape** (``waiting.since_scrape: true``): the scraped count less the first
  tokens the router has seen from the replica since that scrape (:func:`first_token`; the
  scraper marks :attr:`~serving.route.types.ReplicaState.first_tokens_at_scrape`), at least
  zero. A first token means a request left the replica's queue; the scrape, up to an interval
  old, still counts it. The router sees only its own requests' first tokens, so with several
  routers the discount is partial (the count stays an upper bound).

Both hooks are O(1) attribute stores on the dispatch and first-token paths; with a setting off
its fields never move and the signal is exactly the constant rule.

**Both off by default** (bench/RESULTS.md, "The scraped waiting queue priced by what the router
dispatched"). The price raised the gate's precision where the constant was furthest off
(``multi-model``, short prompts) and its goodput past capacity, but on the tails of ``kv-bound``
(both fleets), ``tiers`` and ``mixed`` over the heterogeneous fleet it lost 2.9–10% at some load
past the knee (not diagnosed; the constant's larger count of a scraped queue may have been
holding load back there, where the gate sheds most). Priced at whole prompts (the own count's
unit) it lost too (``kv-bound`` over the heterogeneous fleet −12% at load 4). Counting first
tokens since the scrape lowered goodput at load 4 of ``multi-model``'s head. ``placement bench
loop --offer-waiting-price`` offers the price to the head tuning of traffic of short prompts,
kept only where it loses at no tuning load (:func:`bench.loop.tuning.waiting_variant`); not
offered by default.
"""

from __future__ import annotations

from models.roofline_prior import QUEUED_PROMPT_TOKENS
from serving.route.types import ReplicaState

PRICE_WINDOW = 32  # dispatches the price averages over (then a moving average of 1/32)
PRICES = ("dispatched", "constant")

__all__ = [
    "PRICES",
    "PRICE_WINDOW",
    "QUEUED_PROMPT_TOKENS",
    "first_token",
    "price_dispatch",
    "waiting_tokens",
]


def price_dispatch(state: ReplicaState, uncached_tokens: int) -> None:
    """Fold one request dispatched to ``state``'s replica into its waiting request's price."""
    n = state.prompts_priced + 1
    state.prompts_priced = n
    weight = 1.0 / n if n < PRICE_WINDOW else 1.0 / PRICE_WINDOW
    state.waiting_prompt_tokens += weight * (uncached_tokens - state.waiting_prompt_tokens)


def first_token(state: ReplicaState) -> None:
    """A request dispatched to ``state``'s replica had its first token: it left the queue."""
    state.first_tokens += 1


def waiting_tokens(state: ReplicaState, blocked: float = 0.0) -> float:
    """The scraped waiting requests, less ``blocked`` of them (waiting for a LoRA slot) and the
    first tokens seen since the scrape, in uncached prompt tokens at the replica's price."""
    waiting = (
        state.num_requests_waiting - blocked - (state.first_tokens - state.first_tokens_at_scrape)
    )
    if waiting <= 0.0:
        return 0.0
    priced = state.waiting_prompt_tokens
    return waiting * (priced if state.prompts_priced else QUEUED_PROMPT_TOKENS)
