"""The tokenizer folder made from bpe-openai's vocabulary counts the tokens the emulator counts,
loaded by the Hugging Face tokenizer the load generator uses (in the e2e virtualenv)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from e2e_venv import e2e_venv

from bench.e2e.tokenizer_folder import write_tokenizer_folder
from bench.trace_text import TraceText
from sim.emulator.tokenizer import Tokenizer

_LOAD = """
import json, sys
from transformers import AutoTokenizer
tok = AutoTokenizer.from_pretrained(sys.argv[1])
print(json.dumps([tok.encode(t, add_special_tokens=False) for t in json.load(sys.stdin)]))
"""


def test_the_folder_encodes_as_the_emulator_does(tmp_path: Path) -> None:
    venv = e2e_venv()
    folder = write_tokenizer_folder(tmp_path / "tok")
    texts = [
        "Hello world, this is a test!  Two spaces\n\nand 1234567 digits, é ü 中文 🙂",
        "don't I'll we've 2026-11-26T03:46:01Z :8000/docs",
        TraceText().prompt(tuple(range(20)), 300, 16),
    ]
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", _LOAD, str(folder)],
        input=json.dumps(texts),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={"HF_HUB_DISABLE_TELEMETRY": "1", "PATH": "/usr/bin:/bin"},
    )
    got = json.loads(done.stdout.strip().splitlines()[-1])
    tokenizer = Tokenizer("cl100k_base")
    assert got == [tokenizer.encode(t) for t in texts]
