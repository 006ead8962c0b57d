"""Derive the small test samples in data/samples/ from the real data (reproducible).

Run from the repository root: ``.venv/bin/python data/samples/make_samples.py``. The real data is
found through ``placement.paths.shared_data()`` (``$PLACEMENT_SHARED_DATA`` or ../shared/data).
Every sample is a verbatim prefix or copy of a published file, so loaders see the real format,
except the multi-model sample: the first requests of the ``multi-model`` workload (derived from
ServeGen and Azure, :mod:`sim.workloads.multi_model`) written as a JSONL trace with tenants,
models and LoRA adapters; and the tiers sample: the first requests of the ``tiers`` workload
(Azure, Mooncake and ServeGen tenants in their classes, :mod:`sim.workloads.tiers`) with
tenants, request classes and the documents' block hashes.
"""

from __future__ import annotations

import csv
import json
import shutil
from collections import Counter
from pathlib import Path

from placement.paths import shared_data

SAMPLES = Path(__file__).resolve().parent
MOONCAKE_LINES = 300
AZURE_ROWS = 300
SERVEGEN_CLIENTS = (1, 13)  # 1 has no dataset file (tests the fallback), 13 has one
MAX_BYTES = 200_000
KV_BOUND_LINES = 300
KV_BOUND_SEED = 0
MULTI_MODEL_REQUESTS = 1200
TIERS_REQUESTS = 800


def tiers_sample(target: Path) -> None:
    """The first :data:`TIERS_REQUESTS` requests of the ``tiers`` workload (seed 0) in the JSONL
    trace format, each with its tenant and request class; ``hash_ids`` are the chained block
    hashes of the requests that have them (the documents tenant's, from Mooncake)."""
    from sim.workloads.registry import load_workload

    workload = load_workload("tiers", seed=0, duration_s=300.0)
    lines = []
    for r in workload.requests[:TIERS_REQUESTS]:
        record: dict[str, object] = {
            "timestamp": round(r.arrival_s * 1000.0, 3),
            "input_length": r.input_tokens,
            "output_length": r.output_tokens,
            "tenant": r.tenant,
            "request_class": r.request_class,
        }
        if r.block_hashes:
            record["hash_ids"] = list(r.block_hashes)
        lines.append(json.dumps(record, separators=(",", ":")) + "\n")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("".join(lines), encoding="utf-8")


def multi_model_sample(target: Path) -> None:
    """The first :data:`MULTI_MODEL_REQUESTS` requests of the ``multi-model`` workload (seed 0)
    in the JSONL trace format, adapters with their ranks."""
    from sim.workloads.multi_model import load_multi_model

    workload = load_multi_model(seed=0, duration_s=60.0)
    lines = []
    for r in workload.requests[:MULTI_MODEL_REQUESTS]:
        record = {
            "timestamp": round(r.arrival_s * 1000.0, 3),
            "input_length": r.input_tokens,
            "output_length": r.output_tokens,
            "tenant": r.tenant,
            "request_class": r.request_class,
            "model": r.model,
        }
        if r.adapter:
            record.update(adapter=r.adapter, adapter_rank=workload.adapters[r.adapter].rank)
        lines.append(json.dumps(record, separators=(",", ":")) + "\n")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("".join(lines), encoding="utf-8")


def head_lines(source: Path, target: Path, lines: int) -> None:
    """The first ``lines`` lines of ``source`` (a trailing newline on each)."""
    with source.open(encoding="utf-8") as handle:
        kept = [next(handle).rstrip("\n") + "\n" for _ in range(lines)]
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("".join(kept), encoding="utf-8")


def shared_prefix_lengths(source: Path, target: Path) -> None:
    """The length (tokens) of every distinct prefix Mooncake's requests share: per request, its
    leading blocks that some other request also has; one row per distinct deepest such block,
    at least two blocks deep (block 0 alone is shared by every request)."""
    with source.open(encoding="utf-8") as handle:
        chains = [json.loads(line)["hash_ids"] for line in handle if line.strip()]
    seen = Counter(h for chain in chains for h in chain)
    deepest: dict[int, int] = {}
    for chain in chains:
        depth = 0
        for h in chain:
            if seen[h] < 2:
                break
            depth += 1
        if depth >= 2:
            deepest[chain[depth - 1]] = depth
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("w", encoding="utf-8", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["tokens"])
        writer.writerows([depth * 512] for depth in sorted(deepest.values()))


def kv_bound_head(target: Path) -> None:
    """The first requests of the kv-bound workload (seed 0) as a JSONL trace with Mooncake's
    keys plus ``tenant``: ``hash_ids`` are its chained block hashes (chaining them again keeps
    which requests share which prefix)."""
    from sim.workloads.kv_bound import kv_bound

    workload = kv_bound(duration_s=600.0, seed=KV_BOUND_SEED)
    lines = [
        json.dumps(
            {
                "timestamp": round(r.arrival_s * 1000.0),
                "input_length": r.input_tokens,
                "output_length": r.output_tokens,
                "hash_ids": list(r.block_hashes),
                "tenant": r.tenant,
            }
        )
        + "\n"
        for r in workload.requests[:KV_BOUND_LINES]
    ]
    target.write_text("".join(lines), encoding="utf-8")


def main() -> None:
    data = shared_data()
    written: list[Path] = []

    target = SAMPLES / "mooncake" / "conversation_trace_first300.jsonl"
    head_lines(data / "traces/mooncake/conversation_trace_first2100s.jsonl", target, MOONCAKE_LINES)
    written.append(target)

    for kind in ("conv", "code"):
        target = SAMPLES / "azure" / f"AzureLLMInferenceTrace_{kind}_first300.csv"
        source = data / f"traces/azure_llm_2023/AzureLLMInferenceTrace_{kind}.csv"
        head_lines(source, target, AZURE_ROWS + 1)  # + the header
        written.append(target)

    source_dir = data / "tenants/servegen/language/m-small"
    target_dir = SAMPLES / "servegen/language/m-small"
    target_dir.mkdir(parents=True, exist_ok=True)
    for client in SERVEGEN_CLIENTS:
        for name in (f"chunk-{client}-trace.csv", f"chunk-{client}-dataset.json"):
            if (source_dir / name).exists():
                shutil.copyfile(source_dir / name, target_dir / name)
                written.append(target_dir / name)

    target = SAMPLES / "kv_bound" / "mooncake_shared_prefix_tokens.csv"
    shared_prefix_lengths(data / "traces/mooncake/conversation_trace_first2100s.jsonl", target)
    written.append(target)
    target = SAMPLES / "kv_bound" / "kv_bound_first300.jsonl"
    kv_bound_head(target)
    written.append(target)
    target = SAMPLES / "multi_model" / "multi_model_first1200.jsonl"
    multi_model_sample(target)
    written.append(target)
    target = SAMPLES / "tiers" / "tiers_first800.jsonl"
    tiers_sample(target)
    written.append(target)

    for path in written:
        size = path.stat().st_size
        if size >= MAX_BYTES:
            raise SystemExit(f"{path} is {size} bytes, over the {MAX_BYTES} budget")
        print(f"{path.relative_to(SAMPLES)}  {size:>7} bytes")


if __name__ == "__main__":
    main()
