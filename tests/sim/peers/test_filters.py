import pytest

from sim.peers.filters import HealthFilter, ModelFilter


@pytest.mark.parametrize(
    ("req_model", "expected"),
    [
        ("", [0, 1, 2, 3]),  # no model asked: every replica
        ("llama", [0, 2]),
        ("qwen", [1, 3]),
        ("mistral", []),
    ],
)
def test_model_filter_keeps_replicas_serving_the_model(
    make_views, make_request, req_model, expected
):
    views = make_views(4, models=["llama", "qwen", "llama", "qwen"])
    kept = ModelFilter().filter(make_request(model=req_model), views, 0.0)
    assert [v.index for v in kept] == expected


@pytest.mark.parametrize(
    ("healthy", "expected"),
    [
        ([True, True, True], [0, 1, 2]),
        ([False, True, False], [1]),
        ([False, False, False], []),
    ],
)
def test_health_filter_drops_unhealthy_replicas(make_views, make_request, healthy, expected):
    views = make_views(3, healthy=healthy)
    kept = HealthFilter().filter(make_request(), views, 0.0)
    assert [v.index for v in kept] == expected
