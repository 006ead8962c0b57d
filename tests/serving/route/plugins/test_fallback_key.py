"""A request with no prefix blocks starts its fallback ring walk at a key that depends on its
tenant, model and adapter only — the same in every process (not Python's salted ``hash``)."""

from __future__ import annotations

import os
import subprocess
import sys

from serving.route.plugins.base import _session_hash

CODE = "from serving.route.plugins.base import _session_hash as h; print(h('acme', 'm', 'a'))"


def test_the_key_is_the_same_in_processes_with_different_hash_salts():
    keys = set()
    for salt in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=salt, PYTHONPATH=os.pathsep.join(sys.path))
        out = subprocess.run(
            [sys.executable, "-c", CODE], env=env, capture_output=True, text=True, check=True
        )
        keys.add(int(out.stdout))
    assert keys == {_session_hash("acme", "m", "a")}


def test_adapters_of_one_tenant_get_their_own_keys():
    assert _session_hash("acme", "m", "a1") != _session_hash("acme", "m", "a2")
    assert 0 <= _session_hash("acme", "m", "") < 1 << 63
