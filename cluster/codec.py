"""What crosses the bus between a channel's owner and the other processes: typed values as JSON.

The hall's typed states (hall.states.ChannelState and what it holds), the inbox's items
(reader.events, hall.inbox.PrepareMatch) and the owner's errors go out as plain JSON
(`to_plain`: a dataclass as an object of its fields, an enum as its value, a tuple as a list)
and come back as the same types (`from_plain`, led by the type's annotations, never by names
in the message): a process builds only the classes it was told to expect, so a message
cannot make it construct anything else (no pickle on a bus others might reach).
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar, Union

T = TypeVar("T")

_HINTS: dict[type, dict[str, Any]] = {}


class CodecError(ValueError):
    """A message that is not of the type expected."""


def to_plain(v: object) -> Any:
    if v is None or type(v) in (str, int, float, bool):
        return v
    if isinstance(v, Enum):
        return v.value
    if isinstance(v, Path):
        return str(v)
    if isinstance(v, list | tuple):
        return [to_plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): to_plain(x) for k, x in v.items()}
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: to_plain(getattr(v, f.name)) for f in dataclasses.fields(v)}
    raise CodecError(f"cannot send a {type(v).__name__} over the bus")


def dumps(v: object) -> bytes:
    return json.dumps(to_plain(v), ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def loads(tp: type[T], data: bytes) -> T:
    try:
        plain = json.loads(data)
    except ValueError as e:
        raise CodecError(f"not JSON: {e}") from None
    out: T = from_plain(tp, plain)
    return out


def _hints(cls: type) -> dict[str, Any]:
    h = _HINTS.get(cls)
    if h is None:
        h = _HINTS[cls] = typing.get_type_hints(cls)
    return h


def from_plain(tp: Any, v: Any) -> Any:
    """`v` (JSON values) as a value of type `tp`; CodecError if it is not one."""
    if tp is Any or tp is object:
        return v
    origin = typing.get_origin(tp)
    if origin is Union or origin is types.UnionType:
        args = typing.get_args(tp)
        if v is None and type(None) in args:
            return None
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return from_plain(a, v)
            except CodecError as e:
                errors.append(str(e))
        raise CodecError("; ".join(errors) or f"{v!r} is not {tp}")
    if origin is typing.Literal:
        if v in typing.get_args(tp):
            return v
        raise CodecError(f"{v!r} is not one of {typing.get_args(tp)}")
    if origin in (tuple, list):
        if not isinstance(v, list):
            raise CodecError(f"expected a list, got {type(v).__name__}")
        args = typing.get_args(tp)
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(args) != len(v):
                raise CodecError(f"expected {len(args)} items, got {len(v)}")
            return tuple(from_plain(a, x) for a, x in zip(args, v, strict=True))
        item = args[0] if args else Any
        items = [from_plain(item, x) for x in v]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(v, dict):
            raise CodecError(f"expected an object, got {type(v).__name__}")
        _k, val = typing.get_args(tp) or (str, Any)
        return {str(k): from_plain(val, x) for k, x in v.items()}
    if isinstance(tp, type):
        if dataclasses.is_dataclass(tp):
            if not isinstance(v, dict):
                raise CodecError(f"expected a {tp.__name__}, got {type(v).__name__}")
            hints = _hints(tp)
            kwargs = {}
            for f in dataclasses.fields(tp):
                if f.name in v:
                    kwargs[f.name] = from_plain(hints[f.name], v[f.name])
                elif (f.default is dataclasses.MISSING
                      and f.default_factory is dataclasses.MISSING):
                    raise CodecError(f"a {tp.__name__} without its {f.name}")
            return tp(**kwargs)
        if issubclass(tp, Enum):
            try:
                return tp(v)
            except ValueError:
                raise CodecError(f"{v!r} is not a {tp.__name__}") from None
        if tp is float and type(v) in (int, float):
            return float(v)
        if tp is Path and isinstance(v, str):
            return Path(v)
        if tp in (str, int, bool) and type(v) is tp:
            return v
        raise CodecError(f"expected {tp.__name__}, got {type(v).__name__}")
    raise CodecError(f"cannot read a {tp}")
