"""KV-bound traffic: hot shared prefixes whose KV footprint is many replicas' caches, with
skewed popularity that drifts, built from the real traces.

Every request is one shared prefix (a *document*: a system prompt, a RAG document or an agent's
context) followed by the request's own text:

* **Arrivals, own text and output** are the Azure 2023 chat trace's, row for row
  (``TIMESTAMP``, ``ContextTokens`` as the text after the document, ``GeneratedTokens``).
* **Document lengths** are drawn from the lengths of the prefixes Mooncake's conversation trace
  really shares (``data/samples/kv_bound/mooncake_shared_prefix_tokens.csv``, one length per
  distinct deepest shared block chain; median ~6k tokens, mean ~11k, 95th percentile ~38k),
  capped at ``max_document_tokens``. ``documents`` of them make the catalogue: with the
  defaults ~3M tokens of KV, ~8× one H100's whole cache for Llama-3-8B.
* **Popularity** is Zipf over ranks, ``P(rank k) ∝ (k + 1) ** -zipf``, and **drifts**: every
  ``drift_period_s`` a share ``drift`` of the hot head (the top ``HOT_HEAD`` of the ranks)
  trades rank with documents drawn from the rest, so what is hot in the trace's head is not
  all hot in its tail.
* **Tenants** by what the document is: ``assistant`` (system prompts, < 4k tokens), ``rag``
  (documents up to 24k) and ``agents`` (longer contexts), equal credits; all interactive.

Block hashes: the document's full blocks are content ids of the document (shared by every
request on it), the blocks after it content ids of the request, chained with
:func:`placement.domain.prefix.chain_block_ids`: requests share exactly their document's full
blocks, so each document is one prefix group (:mod:`placement.solver.prefix_groups`).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from placement.domain.prefix import chain_block_ids
from placement.domain.requests import Tenant
from placement.errors import InputError
from placement.paths import repo_root
from sim.workloads.assemble import assemble
from sim.workloads.azure import load_azure
from sim.workloads.base import Workload

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

DOCUMENT_LENGTHS = repo_root() / "data/samples/kv_bound/mooncake_shared_prefix_tokens.csv"
HOT_HEAD = 0.1  # share of the ranks that make the hot head the drift reshuffles
TENANTS = ("assistant", "rag", "agents")
ASSISTANT_MAX_TOKENS = 4096
RAG_MAX_TOKENS = 24576
_ID_SPACE = 1 << 32  # content ids: owner * 2**32 + block index (owners: documents, requests)


@dataclass(frozen=True, slots=True, kw_only=True)
class KvBoundShape:
    """The knobs of :func:`kv_bound` (see the module docstring)."""

    documents: int = 300
    zipf: float = 1.0
    drift: float = 0.3
    drift_period_s: float = 300.0
    max_document_tokens: int = 49152
    block_tokens: int = 512

    def check(self) -> None:
        rules = (
            ("documents", self.documents >= 1, ">= 1"),
            ("zipf", self.zipf >= 0, ">= 0"),
            ("drift", 0 <= self.drift <= 1, "in [0, 1]"),
            ("drift_period_s", self.drift_period_s > 0, "> 0"),
            ("max_document_tokens", self.max_document_tokens >= self.block_tokens, ">= a block"),
            ("block_tokens", self.block_tokens >= 1, ">= 1"),
        )
        for name, ok, expected in rules:
            if not ok:
                raise InputError(
                    "invalid kv-bound workload parameter", field=name, expected=expected
                )


def document_lengths(path: Path = DOCUMENT_LENGTHS) -> IntArray:
    """The shared-prefix lengths (tokens) the catalogue's documents are drawn from."""
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            rows = list(csv.DictReader(handle))
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", source=str(path)) from None
    try:
        lengths = np.asarray([int(r["tokens"]) for r in rows], dtype=np.int64)
    except (KeyError, TypeError, ValueError):
        raise InputError(
            "bad row", source=str(path), field="tokens", expected="an integer"
        ) from None
    if lengths.size == 0 or (lengths < 1).any():
        raise InputError("no lengths", source=str(path), field="tokens", expected="positive")
    return lengths


def popularity(shape: KvBoundShape, epochs: int, rng: np.random.Generator) -> FloatArray:
    """``p[e, doc]``: each document's probability in drift epoch ``e`` (rows sum to 1)."""
    n = shape.documents
    weight = np.arange(1, n + 1, dtype=np.float64) ** -shape.zipf
    weight /= weight.sum()
    doc_at_rank = rng.permutation(n)
    head = max(1, round(HOT_HEAD * n))
    swaps = round(shape.drift * head) if n > head else 0
    out = np.empty((epochs, n))
    for e in range(epochs):
        if e and swaps:
            hot = rng.choice(head, swaps, replace=False)
            cold = head + rng.choice(n - head, swaps, replace=False)
            doc_at_rank[hot], doc_at_rank[cold] = doc_at_rank[cold], doc_at_rank[hot].copy()
        out[e, doc_at_rank] = weight
    return out


def kv_bound(
    *,
    duration_s: float,
    seed: int,
    shape: KvBoundShape = KvBoundShape(),
    arrivals: Workload | None = None,
    lengths: IntArray | None = None,
) -> Workload:
    """The kv-bound workload over ``[0, duration_s)``; deterministic for ``seed``.

    ``arrivals`` (default: the Azure chat trace) gives each request's arrival, own text and
    output length; ``lengths`` (default: :func:`document_lengths`) the document lengths.
    """
    shape.check()
    if not duration_s > 0:
        raise InputError("invalid kv-bound workload parameter", field="duration_s", expected="> 0")
    if seed < 0:
        raise InputError("invalid kv-bound workload parameter", field="seed", expected=">= 0")
    source = (arrivals if arrivals is not None else load_azure("conv")).window(0.0, duration_s)
    rng = np.random.default_rng(seed)
    pool = lengths if lengths is not None else document_lengths()
    doc_tokens = np.minimum(rng.choice(pool, shape.documents), shape.max_document_tokens)
    doc_tokens = np.maximum(doc_tokens, shape.block_tokens)

    arrival = np.fromiter((r.arrival_s for r in source.requests), np.float64, len(source))
    epoch = (arrival // shape.drift_period_s).astype(np.int64)
    epochs = int(epoch.max()) + 1 if epoch.size else 1
    p = popularity(shape, epochs, rng)
    doc = np.empty(len(source), dtype=np.int64)
    for e in range(epochs):
        at = np.flatnonzero(epoch == e)
        doc[at] = rng.choice(shape.documents, at.size, p=p[e])

    own = np.fromiter((r.input_tokens for r in source.requests), np.int64, len(source))
    output = np.fromiter((r.output_tokens for r in source.requests), np.int64, len(source))
    input_tokens = doc_tokens[doc] + np.maximum(own, 1)
    tenant = np.where(
        doc_tokens < ASSISTANT_MAX_TOKENS, 0, np.where(doc_tokens <= RAG_MAX_TOKENS, 1, 2)
    )
    return assemble(
        "kv-bound",
        arrival_s=arrival,
        input_tokens=input_tokens,
        output_tokens=np.maximum(output, 1),
        tenant_index=tenant[doc],
        tenant_names=TENANTS,
        class_index=np.zeros(len(source), dtype=np.int64),
        class_names=("interactive",),
        tenants={t: Tenant(name=t, credit_share=1.0 / len(TENANTS)) for t in TENANTS},
        block_hashes=_block_hashes(doc, doc_tokens, input_tokens, shape),
        block_tokens=shape.block_tokens,
    )


def _block_hashes(
    doc: IntArray, doc_tokens: IntArray, input_tokens: IntArray, shape: KvBoundShape
) -> list[tuple[int, ...]]:
    """Each request's chained hashes: its document's full blocks, then its own full blocks."""
    bt = shape.block_tokens
    chains: dict[int, tuple[int, ...]] = {}
    out: list[tuple[int, ...]] = []
    for i, (d, n_in) in enumerate(zip(doc.tolist(), input_tokens.tolist(), strict=True)):
        chain = chains.get(d)
        if chain is None:
            base = d * _ID_SPACE
            chain = chains[d] = chain_block_ids(range(base, base + int(doc_tokens[d]) // bt))
        full = n_in // bt
        if full > len(chain):
            base = (shape.documents + i) * _ID_SPACE
            own = range(base + len(chain), base + full)
            chain = chain + chain_block_ids(own, root=chain[-1])
        out.append(chain)
    return out
