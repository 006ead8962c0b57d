"""Route path plugins by name: what a profile may list under filters, scorers and fallbacks."""

from __future__ import annotations

from collections.abc import Callable

from serving.route.plugins.base import FallbackPicker, ReplicaFilter, ReplicaScorer
from serving.route.plugins.filters.freshness_filter import FreshnessFilter
from serving.route.plugins.filters.health_filter import HealthFilter
from serving.route.plugins.filters.load_cap_filter import LoadCapFilter
from serving.route.plugins.params import Params
from serving.route.plugins.pickers.bounded_load_hash_picker import BoundedLoadHashPicker
from serving.route.plugins.pickers.least_predicted_ttft_picker import LeastPredictedTtftPicker
from serving.route.plugins.pickers.max_score_picker import MaxScorePicker
from serving.route.plugins.scorers.decode_fit_scorer import DecodeFitScorer
from serving.route.plugins.scorers.kv_usage_scorer import KvUsageScorer
from serving.route.plugins.scorers.predicted_ttft_scorer import PredictedTtftScorer
from serving.route.plugins.scorers.prefix_match_scorer import PrefixMatchScorer
from serving.route.plugins.scorers.queue_scorer import QueueScorer

FILTERS: dict[str, Callable[[Params], ReplicaFilter]] = {
    HealthFilter.name: HealthFilter.from_params,
    FreshnessFilter.name: FreshnessFilter.from_params,
    LoadCapFilter.name: LoadCapFilter.from_params,
}
SCORERS: dict[str, Callable[[Params], ReplicaScorer]] = {
    PrefixMatchScorer.name: PrefixMatchScorer.from_params,
    QueueScorer.name: QueueScorer.from_params,
    KvUsageScorer.name: KvUsageScorer.from_params,
    PredictedTtftScorer.name: PredictedTtftScorer.from_params,
    DecodeFitScorer.name: DecodeFitScorer.from_params,
}
#: Fallback pickers get the profile's weighted scorers too (only max-score-picker uses them).
PickerFactory = Callable[[Params, tuple[tuple[ReplicaScorer, float], ...]], FallbackPicker]
PICKERS: dict[str, PickerFactory] = {
    BoundedLoadHashPicker.name: BoundedLoadHashPicker.from_params,
    LeastPredictedTtftPicker.name: LeastPredictedTtftPicker.from_params,
    MaxScorePicker.name: MaxScorePicker.from_params,
}

__all__ = [
    "FILTERS",
    "PICKERS",
    "SCORERS",
    "FallbackPicker",
    "Params",
    "PickerFactory",
    "ReplicaFilter",
    "ReplicaScorer",
]
