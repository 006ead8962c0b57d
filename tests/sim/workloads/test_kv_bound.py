"""The kv-bound generator: real arrivals and lengths, documents as prefix groups, Zipf
popularity that drifts, footprint many caches over, determinism, bad parameters."""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from placement.domain.prefix import shared_prefix_blocks
from placement.errors import InputError
from placement.solver.prefix_groups import find_groups
from sim.workloads.azure import load_azure
from sim.workloads.kv_bound import (
    DOCUMENT_LENGTHS,
    HOT_HEAD,
    KvBoundShape,
    document_lengths,
    kv_bound,
    popularity,
)
from sim.workloads.registry import load_workload
from sim.workloads.trace_file import load_trace_file

SAMPLES = Path(__file__).resolve().parents[3] / "data" / "samples"
AZURE_SAMPLE = SAMPLES / "azure" / "AzureLLMInferenceTrace_conv_first300.csv"
H100_LLAMA_8B_KV_TOKENS = 411_529


def _sample_workload(seed: int = 0, **shape: float) -> tuple[object, object]:
    arrivals = load_azure("conv", AZURE_SAMPLE)
    return arrivals, kv_bound(
        duration_s=1e6, seed=seed, arrivals=arrivals, shape=KvBoundShape(**shape)
    )


def test_requests_keep_the_traces_arrivals_and_lengths() -> None:
    arrivals = load_azure("conv", AZURE_SAMPLE)
    wl = kv_bound(duration_s=1e6, seed=0, arrivals=arrivals)
    assert len(wl) == len(arrivals)
    assert [r.arrival_s for r in wl.requests] == [r.arrival_s for r in arrivals.requests]
    assert [r.output_tokens for r in wl.requests] == [r.output_tokens for r in arrivals.requests]
    lengths = set(document_lengths().tolist())
    for r, a in zip(wl.requests, arrivals.requests, strict=True):
        doc = r.input_tokens - a.input_tokens  # the document in front of the request's text
        assert doc in lengths or doc == KvBoundShape().max_document_tokens
        assert r.request_class == "interactive" and r.tenant in {"assistant", "rag", "agents"}


def test_a_document_is_one_shared_prefix_and_one_group() -> None:
    wl = kv_bound(duration_s=1e6, seed=0, arrivals=load_azure("conv", AZURE_SAMPLE))
    by_doc: dict[int, list[int]] = {}
    for r in wl.requests:
        by_doc.setdefault(r.block_hashes[0], []).append(r.id)
    shared = [ids for ids in by_doc.values() if len(ids) >= 2]
    assert shared
    reqs = wl.requests
    for ids in shared:
        # every two requests on a document share its full blocks, the same number for all
        depth = {
            shared_prefix_blocks(reqs[a].block_hashes, reqs[b].block_hashes)
            for a, b in itertools.pairwise(ids)
        }
        assert len(depth) == 1 and depth.pop() >= 1
    first = [ids[0] for ids in by_doc.values()]
    # requests on different documents share nothing
    assert all(
        shared_prefix_blocks(reqs[a].block_hashes, reqs[b].block_hashes) == 0
        for a, b in itertools.pairwise(first)
    )
    groups = find_groups(wl.requests, window_s=wl.duration_s, block_tokens=wl.block_tokens)
    keys = {g.key for g in groups}
    assert keys and all(g.requests >= 2 for g in groups)
    assert len(keys) <= len(shared)


def test_popularity_is_zipf_and_drifts_in_the_hot_head() -> None:
    shape = KvBoundShape(documents=200, zipf=1.0, drift=0.5)
    p = popularity(shape, epochs=4, rng=np.random.default_rng(1))
    assert p.shape == (4, 200)
    assert np.allclose(p.sum(axis=1), 1.0)
    ranked = np.sort(p[0])[::-1]
    assert ranked[0] / ranked[9] == pytest.approx(10.0)  # (k + 1) ** -1
    head = round(HOT_HEAD * 200)
    hot = [set(np.argsort(-p[e])[:head].tolist()) for e in range(4)]
    for a, b in itertools.pairwise(hot):
        # each epoch half the hot head trades places with colder documents
        assert len(a - b) == round(0.5 * head)
    still = popularity(KvBoundShape(documents=200, drift=0.0), 3, np.random.default_rng(1))
    assert np.array_equal(still[0], still[2])


def test_the_default_catalogue_outgrows_one_replicas_cache_many_times() -> None:
    lengths = document_lengths()
    shape = KvBoundShape()
    rng = np.random.default_rng(0)
    catalogue = np.minimum(rng.choice(lengths, shape.documents), shape.max_document_tokens)
    assert catalogue.sum() > 5 * H100_LLAMA_8B_KV_TOKENS
    # Mooncake's shared prefixes: median a few thousand tokens, a long tail
    assert 2_000 < float(np.median(lengths)) < 16_000 and lengths.max() > 32_768


def test_the_same_seed_gives_the_same_workload() -> None:
    arrivals = load_azure("conv", AZURE_SAMPLE)
    one = kv_bound(duration_s=1e6, seed=3, arrivals=arrivals)
    two = kv_bound(duration_s=1e6, seed=3, arrivals=arrivals)
    other = kv_bound(duration_s=1e6, seed=4, arrivals=arrivals)
    sig = [(r.input_tokens, r.block_hashes, r.tenant) for r in one.requests]
    assert sig == [(r.input_tokens, r.block_hashes, r.tenant) for r in two.requests]
    assert sig != [(r.input_tokens, r.block_hashes, r.tenant) for r in other.requests]


def test_skew_concentrates_traffic_on_few_documents() -> None:
    arrivals = load_azure("conv", AZURE_SAMPLE)
    flat = kv_bound(duration_s=1e6, seed=0, arrivals=arrivals, shape=KvBoundShape(zipf=0.0))
    steep = kv_bound(duration_s=1e6, seed=0, arrivals=arrivals, shape=KvBoundShape(zipf=1.5))

    def top_share(wl: object) -> float:
        counts = Counter(r.block_hashes[0] for r in wl.requests)  # type: ignore[attr-defined]
        return max(counts.values()) / sum(counts.values())

    assert top_share(steep) > 3 * top_share(flat)


def test_the_registry_and_the_shipped_sample_agree() -> None:
    wl = load_workload("kv-bound", duration_s=120.0)
    assert wl.name == "kv-bound" and wl.duration_s < 120.0
    sample = load_trace_file(SAMPLES / "kv_bound" / "kv_bound_first300.jsonl")
    assert len(sample) == 300
    head = load_workload("kv-bound", duration_s=600.0).requests[:300]
    assert [r.input_tokens for r in sample.requests] == [r.input_tokens for r in head]
    assert [r.tenant for r in sample.requests] == [r.tenant for r in head]

    # chaining the sample's hash ids again keeps which requests share which prefix
    def sharing(reqs: list) -> set[tuple[int, int, int]]:  # type: ignore[type-arg]
        first = {}
        out = set()
        for i, r in enumerate(reqs):
            for k, h in enumerate(r.block_hashes):
                j = first.setdefault((k, h), i)
                if j != i:
                    out.add((j, i, k))
        return out

    assert sharing(sample.requests) == sharing(head)


def test_document_lengths_are_read_from_the_shipped_csv(tmp_path: Path) -> None:
    assert DOCUMENT_LENGTHS.exists()
    bad = tmp_path / "lengths.csv"
    bad.write_text("tokens\n12\nlots\n")
    with pytest.raises(InputError) as info:
        document_lengths(bad)
    assert info.value.field == "tokens"


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"documents": 0}, "documents"),
        ({"zipf": -1.0}, "zipf"),
        ({"drift": 1.5}, "drift"),
        ({"drift_period_s": 0.0}, "drift_period_s"),
        ({"max_document_tokens": 10}, "max_document_tokens"),
    ],
)
def test_bad_parameters_name_their_field(kw: dict[str, float], field: str) -> None:
    with pytest.raises(InputError) as info:
        kv_bound(
            duration_s=10.0,
            seed=0,
            arrivals=load_azure("conv", AZURE_SAMPLE),
            shape=KvBoundShape(**kw),  # type: ignore[arg-type]
        )
    assert info.value.field == field
    with pytest.raises(InputError) as info:
        kv_bound(duration_s=0.0, seed=0, arrivals=load_azure("conv", AZURE_SAMPLE))
    assert info.value.field == "duration_s"
