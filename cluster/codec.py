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
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar, Union

T = TypeVar("T")

_SCALARS = (str, int, float, bool)
_FIELDS: dict[type, tuple[str, ...]] = {}  # a dataclass's field names, by its type
_READERS: dict[Any, Callable[[Any], Any]] = {}  # what reads each type (from_plain)


class CodecError(ValueError):
    """A message that is not of the type expected."""


def to_plain(v: object) -> Any:
    t = type(v)
    if v is None or t in _SCALARS:
        return v
    if t is tuple or t is list:
        return [to_plain(x) for x in v]  # type: ignore[attr-defined]
    names = _FIELDS.get(t)
    if names is not None:
        return {n: to_plain(getattr(v, n)) for n in names}
    if isinstance(v, Enum):
        return v.value
    if isinstance(v, Path):
        return str(v)
    if isinstance(v, list | tuple):
        return [to_plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): to_plain(x) for k, x in v.items()}
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        names = _FIELDS[t] = tuple(f.name for f in dataclasses.fields(v))
        return {n: to_plain(getattr(v, n)) for n in names}
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


def from_plain(tp: Any, v: Any) -> Any:
    """`v` (JSON values) as a value of type `tp`; CodecError if it is not one."""
    read = _READERS.get(tp)
    if read is None:
        read = _READERS[tp] = _reader(tp)
    return read(v)


def _reader(tp: Any) -> Callable[[Any], Any]:
    """A function that reads a value of type `tp`, made once per type (a state crosses the bus
    every few seconds per room, to every process: reading it is on the fan-out's path)."""
    if tp is Any or tp is object:
        return _same
    origin = typing.get_origin(tp)
    if origin is Union or origin is types.UnionType:
        return _union(tp)
    if origin is typing.Literal:
        allowed = typing.get_args(tp)

        def literal(v: Any) -> Any:
            if v in allowed:
                return v
            raise CodecError(f"{v!r} is not one of {allowed}")
        return literal
    if origin in (tuple, list):
        return _sequence(tp, origin)
    if origin is dict:
        _k, val = typing.get_args(tp) or (str, Any)

        def mapping(v: Any) -> Any:
            if not isinstance(v, dict):
                raise CodecError(f"expected an object, got {type(v).__name__}")
            return {str(k): from_plain(val, x) for k, x in v.items()}
        return mapping
    if isinstance(tp, type):
        if dataclasses.is_dataclass(tp):
            return _dataclass(tp)
        if issubclass(tp, Enum):
            return _enum(tp)
        return _scalar(tp)
    raise CodecError(f"cannot read a {tp}")


def _same(v: Any) -> Any:
    return v


def _union(tp: Any) -> Callable[[Any], Any]:
    args = typing.get_args(tp)
    optional = type(None) in args
    others = [a for a in args if a is not type(None)]

    def union(v: Any) -> Any:
        if v is None and optional:
            return None
        errors = []
        for a in others:
            try:
                return from_plain(a, v)
            except CodecError as e:
                errors.append(str(e))
        raise CodecError("; ".join(errors) or f"{v!r} is not {tp}")
    return union


def _sequence(tp: Any, origin: Any) -> Callable[[Any], Any]:
    args = typing.get_args(tp)
    if origin is tuple and args and args[-1] is not Ellipsis:
        def fixed(v: Any) -> Any:
            if not isinstance(v, list):
                raise CodecError(f"expected a list, got {type(v).__name__}")
            if len(args) != len(v):
                raise CodecError(f"expected {len(args)} items, got {len(v)}")
            return tuple(from_plain(a, x) for a, x in zip(args, v, strict=True))
        return fixed
    item = args[0] if args else Any
    make = tuple if origin is tuple else list

    def sequence(v: Any) -> Any:
        if not isinstance(v, list):
            raise CodecError(f"expected a list, got {type(v).__name__}")
        return make([from_plain(item, x) for x in v])
    return sequence


def _dataclass(tp: type) -> Callable[[Any], Any]:
    hints = typing.get_type_hints(tp)
    fields = [(f.name, hints[f.name], f.default is dataclasses.MISSING
               and f.default_factory is dataclasses.MISSING) for f in dataclasses.fields(tp)]

    def dataclass(v: Any) -> Any:
        if not isinstance(v, dict):
            raise CodecError(f"expected a {tp.__name__}, got {type(v).__name__}")
        kwargs = {}
        for name, hint, required in fields:
            if name in v:
                kwargs[name] = from_plain(hint, v[name])
            elif required:
                raise CodecError(f"a {tp.__name__} without its {name}")
        return tp(**kwargs)
    return dataclass


def _enum(tp: type[Enum]) -> Callable[[Any], Any]:
    def enum(v: Any) -> Any:
        try:
            return tp(v)
        except ValueError:
            raise CodecError(f"{v!r} is not a {tp.__name__}") from None
    return enum


def _scalar(tp: type) -> Callable[[Any], Any]:
    def scalar(v: Any) -> Any:
        if tp is float and type(v) in (int, float):
            return float(v)
        if tp is Path and isinstance(v, str):
            return Path(v)
        if tp in (str, int, bool) and type(v) is tp:
            return v
        raise CodecError(f"expected {tp.__name__}, got {type(v).__name__}")
    return scalar
