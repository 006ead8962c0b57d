"""Derive the small test samples in data/samples/ from the real data (reproducible).

Run from the repository root: ``.venv/bin/python data/samples/make_samples.py``. The real data is
found through ``placement.paths.shared_data()`` (``$PLACEMENT_SHARED_DATA`` or ../shared/data).
Every sample is a verbatim prefix or copy of a published file, so loaders see the real format.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from placement.paths import shared_data

SAMPLES = Path(__file__).resolve().parent
MOONCAKE_LINES = 300
AZURE_ROWS = 300
SERVEGEN_CLIENTS = (1, 13)  # 1 has no dataset file (tests the fallback), 13 has one
MAX_BYTES = 200_000


def head_lines(source: Path, target: Path, lines: int) -> None:
    """The first ``lines`` lines of ``source`` (a trailing newline on each)."""
    with source.open(encoding="utf-8") as handle:
        kept = [next(handle).rstrip("\n") + "\n" for _ in range(lines)]
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("".join(kept), encoding="utf-8")


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

    for path in written:
        size = path.stat().st_size
        if size >= MAX_BYTES:
            raise SystemExit(f"{path} is {size} bytes, over the {MAX_BYTES} budget")
        print(f"{path.relative_to(SAMPLES)}  {size:>7} bytes")


if __name__ == "__main__":
    main()
