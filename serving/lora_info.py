"""Which LoRA adapters a vLLM engine runs and which wait, from its ``/metrics`` page.

vLLM exports ``vllm:lora_requests_info``, a gauge labelled ``running_lora_adapters`` and
``waiting_lora_adapters`` (comma-separated adapter names: those with requests running, and those
with requests waiting and none running, in the order of its queue) and ``max_lora``, set to the
time it last logged them. A label set it no longer holds stays on the page with its older time,
so the current lists are those of the latest value (per engine core, when the page has several;
their lists are joined). A page without the gauge (an engine serving no adapters, or one that
does not export it) says nothing: :func:`lora_adapters` gives None.
"""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from placement.errors import InputError

LORA_INFO = "vllm:lora_requests_info"

Adapters = tuple[tuple[str, ...], tuple[str, ...]]  # (running, waiting)


def _names(label: str) -> tuple[str, ...]:
    return tuple(name for name in (part.strip() for part in label.split(",")) if name)


def lora_adapters(text: str, source: str = "<metrics>") -> Adapters | None:
    """The (running, waiting) adapters of the latest ``vllm:lora_requests_info`` sample of each
    engine on the page ``text``, joined in engine order (None: no such sample)."""
    lines = [line for line in text.splitlines() if line.startswith(LORA_INFO + "{")]
    if not lines:
        return None
    latest: dict[str, tuple[float, dict[str, str]]] = {}
    try:
        for family in text_string_to_metric_families("\n".join(lines)):
            for sample in family.samples:
                engine = sample.labels.get("engine", "")
                seen = latest.get(engine)
                if seen is None or sample.value >= seen[0]:
                    latest[engine] = (float(sample.value), sample.labels)
    except ValueError as exc:
        raise InputError(
            f"unreadable {LORA_INFO} ({exc})", source=source, expected="Prometheus text exposition"
        ) from None
    running: dict[str, None] = {}
    waiting: dict[str, None] = {}
    for engine in sorted(latest):
        labels = latest[engine][1]
        running.update(dict.fromkeys(_names(labels.get("running_lora_adapters", ""))))
        waiting.update(dict.fromkeys(_names(labels.get("waiting_lora_adapters", ""))))
    # an adapter one engine runs while another holds it waiting: running (it holds a slot)
    return tuple(running), tuple(a for a in waiting if a not in running)
