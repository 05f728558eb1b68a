"""The one place a channel's typed states become the wire's JSON objects (the hub's sends, the
REST answers): dataclasses become objects of their fields, enums their values, tuples lists.

A field may say how it goes out in its metadata (`WIRE`): `flatten` (its object's keys are
the parent's, before the parent's own fields: a later field of the same name wins) or
`omit_none` (left out when None)."""

from __future__ import annotations

import dataclasses
from enum import Enum
from typing import Any, Final

FLATTEN: Final = {"wire": "flatten"}
OMIT_NONE: Final = {"wire": "omit_none"}

# each dataclass's fields, in order, with how they go out (computed once per class)
_PLANS: dict[type, tuple[tuple[str, str], ...]] = {}


def _plan(cls: type) -> tuple[tuple[str, str], ...]:
    plan = _PLANS.get(cls)
    if plan is None:
        plan = _PLANS[cls] = tuple((f.name, str(f.metadata.get("wire", "")))
                                   for f in dataclasses.fields(cls))
    return plan


def to_wire(v: object) -> Any:
    """`v` as JSON values (dict, list, str, int, float, bool, None)."""
    if v is None or type(v) in (str, int, float, bool):
        return v
    if isinstance(v, Enum):
        return v.value
    if isinstance(v, list | tuple):
        return [to_wire(x) for x in v]
    if isinstance(v, dict):
        return {k: to_wire(x) for k, x in v.items()}
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        out: dict[str, Any] = {}
        for name, how in _plan(type(v)):
            x = getattr(v, name)
            if how == "flatten":
                if x is not None:
                    out.update(to_wire(x))
            elif how == "omit_none" and x is None:
                continue
            else:
                out[name] = to_wire(x)
        return out
    return v
