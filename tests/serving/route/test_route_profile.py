"""Profile loading: phases, defaults, and errors that name file and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from placement.errors import InputError
from serving.route import load_profile, profile_from_text
from serving.route.plugins.filters.freshness_filter import FreshnessFilter
from serving.route.plugins.pickers.bounded_load_hash_picker import BoundedLoadHashPicker
from serving.route.plugins.pickers.least_predicted_ttft_picker import LeastPredictedTtftPicker


def test_default_profile_loads() -> None:
    p = load_profile()
    assert p.name == "default"
    assert [f.name for f in p.filters] == ["health-filter", "freshness-filter", "load-cap-filter"]
    assert isinstance(p.unseen_prefix, BoundedLoadHashPicker)
    assert p.spill_to_secondary


def test_empty_profile_takes_defaults() -> None:
    p = profile_from_text("", source="empty.yaml")
    assert p.candidates == 8 and p.key_blocks == 1
    assert not p.price_waiting and not p.waiting_since_scrape  # the constant price
    assert isinstance(p.planned_unavailable, LeastPredictedTtftPicker)


def test_profile_configures_plugins() -> None:
    p = profile_from_text(
        """
filters: [{name: freshness-filter, staleness_limit_s: 0.5}]
fallbacks:
  unseen_prefix: {picker: bounded-load-hash-picker, epsilon: 0.1}
  no_plan: least-predicted-ttft-picker
""",
        source="p.yaml",
    )
    (f,) = p.filters
    assert isinstance(f, FreshnessFilter) and f.staleness_limit_s == 0.5
    assert isinstance(p.unseen_prefix, BoundedLoadHashPicker) and p.unseen_prefix.epsilon == 0.1
    assert isinstance(p.no_plan, LeastPredictedTtftPicker)
    assert p.load_cap is None


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("filters: [no-such-filter]", "filters[0].name"),
        (
            "filters: [{name: freshness-filter, staleness_limit_s: -1}]",
            "filters[0].staleness_limit_s",
        ),
        ("filters: [{name: load-cap-filter, residence: 3}]", "filters[0].residence"),
        ("scorers: [{name: queue-scorer, weight: -2}]", "scorers[0].weight"),
        ("scorers: [{name: queue-scorer}, {name: queue-scorer}]", "scorers[1].name"),
        ("fallbacks: {unseen_prefix: {picker: magic}}", "fallbacks.unseen_prefix.picker"),
        (
            "fallbacks: {unseen_prefix: {picker: bounded-load-hash-picker, epsilon: 0}}",
            "fallbacks.unseen_prefix.epsilon",
        ),
        ("fallbacks: {panic: max-score-picker}", "fallbacks.panic"),
        ("fallbacks: {spill_to_secondary: maybe}", "fallbacks.spill_to_secondary"),
        ("scorers: []", "fallbacks.no_prefix"),
        ("candidates: 0", "candidates"),
        ("ring: {key_blocks: 0}", "ring.key_blocks"),
        ("colour: blue", "colour"),
        ("plan_picker: random", "plan_picker"),
        ("waiting: 3", "waiting"),
        ("waiting: {price: free}", "waiting.price"),
        ("waiting: {since_scrape: maybe}", "waiting.since_scrape"),
        ("waiting: {discount: 0.5}", "waiting.discount"),
    ],
)
def test_errors_name_the_field(text: str, field: str) -> None:
    with pytest.raises(InputError) as info:
        profile_from_text(text, source="bad.yaml")
    assert info.value.field == field
    assert info.value.source == "bad.yaml"
    assert "bad.yaml" in str(info.value) and field in str(info.value)


def test_the_waiting_queue_settings_are_read() -> None:
    p = profile_from_text("waiting: {price: constant, since_scrape: true}", source="w.yaml")
    assert not p.price_waiting and p.waiting_since_scrape
    p = profile_from_text("waiting: {price: dispatched}", source="w.yaml")
    assert p.price_waiting and not p.waiting_since_scrape  # the key left out: its default


def test_the_lora_slots_censored_rate_is_read_and_off_by_default() -> None:
    assert not profile_from_text("", source="l.yaml").slot_rate_censored
    p = profile_from_text("lora_slots: {censored_rate: true}", source="l.yaml")
    assert p.slot_rate_censored
    for text, field in (
        ("lora_slots: {censored_rate: 1}", "lora_slots.censored_rate"),
        ("lora_slots: {censored: true}", "lora_slots.censored"),
        ("lora_slots: true", "lora_slots"),
    ):
        with pytest.raises(InputError) as info:
            profile_from_text(text, source="l.yaml")
        assert info.value.field == field


def test_the_lora_slots_engine_wait_is_read_and_on_by_default() -> None:
    assert profile_from_text("", source="l.yaml").slot_wait_from_engine
    p = profile_from_text("lora_slots: {engine_wait: false}", source="l.yaml")
    assert not p.slot_wait_from_engine and not p.slot_rate_censored
    with pytest.raises(InputError) as info:
        profile_from_text("lora_slots: {engine_wait: yes please}", source="l.yaml")
    assert info.value.field == "lora_slots.engine_wait"


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    f = tmp_path / "broken.yaml"
    f.write_text("name: x\nfilters: [health-filter\n")
    with pytest.raises(InputError) as info:
        load_profile(f)
    assert info.value.source == str(f) and info.value.line is not None


def test_missing_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read"):
        load_profile(tmp_path / "nope.yaml")


def test_shipped_scored_profile_loads() -> None:
    from serving.route import load_profile

    p = load_profile(Path("data/profiles/scored.yaml"))
    assert p.plan_picker == "scored" and p.load_cap is None
