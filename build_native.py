"""Compile the simulator's hot modules with mypyc into extension modules beside their sources.

Run by ``make compile`` (and so by ``make run`` / ``make test``). The sources stay the truth:
``sim/__init__.py`` refuses a compiled module older than its source.
"""

from mypyc.build import mypycify
from setuptools import setup

MODULES = [
    "sim/engine.py",
    "sim/prefix_cache.py",
    "sim/sequence.py",
    "sim/simulator.py",
    "sim/gateway.py",
]

setup(
    name="placement-native",
    py_modules=[],
    ext_modules=mypycify(MODULES, group_name="sim.native", opt_level="3"),
    script_args=["build_ext", "--inplace", "--build-temp", "build/native"],
)
