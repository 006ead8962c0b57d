"""Building slotted dataclasses on the hot path without their ``__init__``.

A frozen dataclass's ``__init__`` stores each field through ``object.__setattr__``, and a call
with keywords goes through a dictionary of them: building a nine-field
:class:`~serving.route.types.RouteQuery` that way costs more than a plan lookup.
:func:`slot_builder` generates, from the class's own fields (as :mod:`dataclasses` generates
``__init__``), a function taking every field positionally in declaration order, defaults
included, that writes each slot through its descriptor: the same object, equal to the one the
constructor builds, frozen as before once built. It checks nothing the constructor would not:
the classes it serves validate nothing in ``__init__`` (it refuses a ``__post_init__``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from types import MemberDescriptorType
from typing import Any, TypeVar

T = TypeVar("T")


def slot_builder(cls: type[T]) -> Callable[..., T]:
    """``build(*fields)``: an instance of ``cls`` (a dataclass with ``slots=True``) from its
    fields in declaration order; trailing fields with a default may be left out."""
    if not dataclasses.is_dataclass(cls) or hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__}: a slotted dataclass without __post_init__ expected")
    namespace: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    params: list[str] = []
    writes: list[str] = []
    for f in dataclasses.fields(cls):
        slot = cls.__dict__.get(f.name)
        if not isinstance(slot, MemberDescriptorType):
            raise TypeError(f"{cls.__name__}.{f.name} is not a slot")
        if f.default_factory is not dataclasses.MISSING:
            raise TypeError(f"{cls.__name__}.{f.name} has a default factory")
        namespace[f"_set_{f.name}"] = slot.__set__
        if f.default is not dataclasses.MISSING:
            namespace[f"_default_{f.name}"] = f.default
            params.append(f"{f.name}=_default_{f.name}")
        elif params and "=" in params[-1]:
            raise TypeError(f"{cls.__name__}.{f.name}: a field without a default after one with")
        else:
            params.append(f.name)
        writes.append(f"    _set_{f.name}(obj, {f.name})\n")
    head = f"def build({', '.join(params)}):\n    obj = _new(_cls)\n"
    exec(head + "".join(writes) + "    return obj\n", namespace)  # the class's own field names
    build: Callable[..., T] = namespace["build"]
    build.__qualname__ = build.__name__ = f"build_{cls.__name__}"
    return build
