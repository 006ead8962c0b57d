"""GIE's LoRA affinity: the adapter's active pods first, then pods with a free slot, then
least queue; requests with no adapter route by queue and KV alone."""

import pytest

from sim.peers import PolicyContext, make_policy


def _views(make_views, adapters, waiting, max_loras=2):
    views = make_views(len(adapters), waiting=waiting)
    for v, held in zip(views, adapters, strict=True):
        v.adapters = tuple(held)
        v.max_loras = max_loras
    return views


@pytest.mark.parametrize(
    ("adapters", "waiting", "adapter", "expected"),
    [
        ([("a",), (), ("b", "c")], [9, 0, 0], "a", 0),  # active there: affinity beats queue
        ([("b", "c"), ("d",), ()], [0, 5, 3], "a", 2),  # no affinity: free slots, least queue
        ([("b", "c"), ("d", "e")], [4, 1], "a", 1),  # no slot anywhere: least queue
        ([("a",), ()], [200, 0], "a", 1),  # the affine pod's queue is past the threshold
        ([("a",), ()], [3, 0], "", 1),  # no adapter: least queue
    ],
)
def test_lora_affinity_then_free_slots_then_least_queue(
    make_views, make_request, adapters, waiting, adapter, expected
):
    views = _views(make_views, adapters, waiting)
    req = make_request()
    req.adapter = adapter
    assert make_policy("gie_lora", PolicyContext(seed=0)).route(req, views, 0.0) == expected
