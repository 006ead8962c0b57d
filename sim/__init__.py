"""The fleet simulator: replicas with continuous batching over measured engine timings.

The hot modules (engine, prefix cache, sequence, simulator loop, gateway) may be compiled with
mypyc (``make compile``) into extension modules beside their sources; Python then imports
those. A compiled module older than its source would run stale code, so that is refused.
"""

from __future__ import annotations

from pathlib import Path


def _refuse_stale_compiled_modules() -> None:
    here = Path(__file__).parent
    for ext in here.glob("*.cpython-*.so"):
        source = here / (ext.name.split(".", 1)[0] + ".py")
        if source.exists() and source.stat().st_mtime > ext.stat().st_mtime:
            raise ImportError(
                f"{ext} is older than {source.name}: run `make compile` to rebuild it "
                f"(or delete it to run the pure-Python module)"
            )


_refuse_stale_compiled_modules()
