"""The profiled cost model: monotone, TP-aware, O(1) lookups, faithful to its tables."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest

from placement.domain.accelerators import get_accelerator
from placement.domain.llm import get_model
from sim.costmodel.profiled import MAX_TOKENS, ProfiledCostModel, padded_envelope
from sim.costmodel.profiles import profiles_root

pytestmark = pytest.mark.skipif(not profiles_root().is_dir(), reason="shared profiles missing")

KINDS = [
    ("H100-SXM", "llama-3-8b", 1),
    ("H100-SXM", "llama-2-70b", 4),
    ("A100-80G", "llama-2-70b", 2),
    ("A100-80G", "qwen2.5-32b", 1),
    ("L40S", "llama-3-8b", 1),
    ("B200", "qwen2.5-32b", 2),
    ("H100-SXM", "mixtral-8x7b", 2),
    ("A100-80G", "qwen3-30b-a3b", 4),
]


def _model(kind, model, tp, **kw):
    return ProfiledCostModel(get_accelerator(kind), get_model(model), tp, **kw)


@pytest.fixture(scope="module", params=KINDS, ids=lambda k: f"{k[0]}-{k[1]}-tp{k[2]}")
def cm(request):
    return _model(*request.param)


def _non_decreasing(values):
    return all(b >= a for a, b in pairwise(values))


def test_monotone_in_tokens(cm):
    assert _non_decreasing([cm.linear_s(m) for m in range(1, MAX_TOKENS + 1, 7)])
    assert _non_decreasing([cm.iteration_s([(c, 0)], 0, 0) for c in (16, 128, 1024, 8192, 32768)])
    decode = [cm.iteration_s([], n, n * 1000) for n in (1, 2, 8, 32, 128, 512, 2048)]
    assert _non_decreasing(decode) and decode[-1] > decode[0]


def test_monotone_in_context(cm):
    prefill = [cm.prefill_attention_s(512, p) for p in (0, 100, 1000, 10_000, 100_000)]
    assert all(b > a for a, b in pairwise(prefill))
    for n in (1, 16, 256):
        d0, d1 = cm.decode_attention_coeffs(n)
        assert d0 >= 0.0 and d1 > 0.0


def test_hot_path_returns_python_floats(cm):
    values = [
        cm.linear_s(300),
        cm.linear_s(MAX_TOKENS + 10),
        cm.prefill_attention_s(512, 100),
        *cm.decode_attention_coeffs(64),
        cm.iteration_s([(512, 100)], 64, 64_000),
        cm.overhead_s,
    ]
    assert all(type(v) is float for v in values)


def test_iteration_is_the_documented_sum(cm):
    chunks = [(512, 0), (256, 4096)]
    d0, d1 = cm.decode_attention_coeffs(40)
    expected = (
        cm.overhead_s
        + cm.linear_s(40 + 512 + 256)
        + sum(cm.prefill_attention_s(c, p) for c, p in chunks)
        + d0
        + d1 * 40 * 2000
    )
    assert cm.iteration_s(chunks, 40, 40 * 2000) == pytest.approx(expected, rel=1e-12)
    assert cm.decode_attention_coeffs(0) == (0.0, 0.0)
    assert cm.iteration_s([], 0, 0) == cm.overhead_s


def test_linear_beyond_the_table_grows_in_proportion(cm):
    assert cm.linear_s(2 * MAX_TOKENS) == pytest.approx(2 * cm.linear_s(MAX_TOKENS))


def test_attention_fits_are_close_to_their_tables(cm):
    # median relative residual over all measured points of the head shape
    limit = 0.2 if cm.accelerator.kind == "L40S" else 0.1
    assert cm.decode_fit.median_ape < limit
    assert cm.prefill_fit.median_ape < 0.1


@pytest.mark.parametrize("kind", ["A100-80G", "H100-SXM", "B200"])
def test_tp_reduces_time_for_large_batches(kind):
    times = [_model(kind, "llama-2-70b", tp).linear_s(8192) for tp in (1, 2, 4, 8)]
    assert all(b < 0.75 * a for a, b in pairwise(times))


def test_moe_reads_only_routed_experts():
    # one decode token of Mixtral on TP2 reads 2 of 8 experts: well under all weights at full HBM
    accelerator, model = get_accelerator("H100-SXM"), get_model("mixtral-8x7b")
    cm = ProfiledCostModel(accelerator, model, 2)
    all_weights_s = model.weight_bytes() / 2 / (accelerator.hbm_tbps * 1e12)
    assert 0.15 * all_weights_s < cm.linear_s(1) < 0.6 * all_weights_s
    assert cm.linear_s(4096) > 4 * cm.linear_s(1)


def test_overhead_is_framework_plus_one_attention_call_per_layer():
    cm = _model("H100-SXM", "llama-3-8b", 1, framework_overhead_s=0.002)
    assert cm.overhead_s == pytest.approx(0.002 + 32 * cm.prefill_fit.fixed_s)
    assert 5e-6 < cm.prefill_fit.fixed_s < 5e-5  # a kernel launch, not a table artefact


def test_a_second_model_on_loaded_tables_is_built():
    _model("H100-SXM", "llama-3-8b", 1)
    assert _model("H100-SXM", "qwen2.5-32b", 2) is not None


@pytest.mark.parametrize(
    ("times", "expected"),
    [([3.0, 1.0, 2.0, 5.0], [1.0, 1.0, 2.0, 5.0]), ([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])],
)
def test_padded_envelope(times, expected):
    assert padded_envelope(np.asarray(times)).tolist() == expected
