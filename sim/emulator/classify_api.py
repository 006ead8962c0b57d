"""The classification protocol of a pooling model (``POST /classify``), as vLLM serves it.

A request names the ``model`` and gives ``input`` in any shape ``/v1/embeddings`` takes
(:func:`sim.emulator.embeddings_api.parse_inputs`); the answer has one object per input, in
order: ``{"index", "label", "probs", "num_classes"}``, and the usage. The emulator's stand-in
for a classifier (:func:`class_probs`) gives probabilities that depend only on the input, over
:data:`LABELS`.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np

from sim.emulator.embeddings_api import Input, parse_inputs
from sim.emulator.openai_api import ApiError

CLASSIFY = "/classify"
LABELS = ("LABEL_0", "LABEL_1")  # a model config's default id2label for two classes


@dataclass(frozen=True, slots=True, kw_only=True)
class ClassifyRequest:
    model: str
    inputs: tuple[Input, ...]


def parse_classify(body: dict[str, Any]) -> ClassifyRequest:
    """The classification ``body`` asks for; ``ApiError(400)`` naming the parameter otherwise."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise ApiError(400, "'model' is required (a string)", param="model")
    return ClassifyRequest(model=model, inputs=parse_inputs(body.get("input")))


def class_probs(item: Input) -> list[float]:
    """Probabilities over :data:`LABELS` determined by the input alone."""
    text = item if isinstance(item, str) else ",".join(map(str, item))
    seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
    logits = np.random.default_rng(seed).standard_normal(len(LABELS))
    e = np.exp(logits - logits.max())
    return [float(p) for p in e / e.sum()]


def classify_body(model: str, probs: list[list[float]], prompt_tokens: int) -> bytes:
    data = [
        {
            "index": i,
            "label": LABELS[int(np.argmax(p))],
            "probs": p,
            "num_classes": len(p),
        }
        for i, p in enumerate(probs)
    ]
    usage = {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens, "completion_tokens": 0}
    return json.dumps(
        {
            "id": "classify-" + uuid.uuid4().hex,
            "object": "list",
            "created": int(time.time()),
            "model": model,
            "data": data,
            "usage": usage,
        }
    ).encode()
