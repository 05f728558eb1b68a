"""Typed configuration, loaded once from config.yaml into frozen models: the engine's own part
(`match`: the programme, its gaps and calls) and the machinery every layer's part shares.

An unknown key, a wrong type or an impossible value raises ConfigError naming the key (its
dotted path) and what is allowed there. Units are in the names (`_s` seconds, `_ms`). Each
layer keeps its settings with it (audio/config.py, desk/config.py, hall/config.py); the whole
file is assembled in hall/config.py.
"""

import difflib
import re
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from .deck import parse_color
from .errors import BadDeck, ConfigError
from .text import check_yomi, clean_text


class Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Spoken(Frozen):
    """A call or the jokā: `text` is shown, `yomi` (kana) is what the voice says."""

    text: str = Field(min_length=1, max_length=200)
    yomi: str = Field(min_length=1, max_length=200)

    @field_validator("text")
    @classmethod
    def _clean_text(cls, v: str) -> str:
        out = clean_text(v, "the text")
        if not out:
            raise ValueError("the text is empty")
        return out

    @field_validator("yomi")
    @classmethod
    def _speakable(cls, v: str) -> str:
        return check_yomi(v)


class Call(Spoken):
    """A call that a hall may do without: `enabled: false` leaves it out of the programme."""

    enabled: bool = True


class ResumePolicy(StrEnum):
    RESTART_VERSE = "restart_verse"
    RESTART_CARD = "restart_card"
    CONTINUE = "continue"


Seconds = float


class GapsConfig(Frozen):
    after_bow_s: Seconds = Field(3.0, ge=0, le=60)
    after_call_s: Seconds = Field(1.0, ge=0, le=60)
    between_verses_s: Seconds = Field(1.0, ge=0, le=60)
    between_cards_s: Seconds = Field(1.5, ge=0, le=60)
    repeat_s: Seconds = Field(1.0, ge=0, le=60)
    before_move_s: Seconds = Field(2.0, ge=0, le=60)


class PreludeConfig(Frozen):
    enabled: bool = True
    intro: Spoken = Spoken(
        text="ご用意よければ 空札一枚", yomi="ごよういよければ からふだいちまい"
    )
    kami: Spoken = Spoken(
        text="東海の 小島の磯の 白砂に", yomi="とうかいの こじまのいその しらすなに"
    )
    shimo: Spoken = Spoken(
        text="われ泣きぬれて 蟹とたはむる", yomi="われなきぬれて かにとたわむる"
    )


class ResumeConfig(Frozen):
    policy: ResumePolicy = ResumePolicy.RESTART_VERSE
    lead_in_s: Seconds = Field(1.0, ge=0, le=30)


_CALLS = ("bow_call", "memorise_call", "extra_call", "again_call", "end_call", "move_call")


class MatchConfig(Frozen):
    colors: tuple[str, ...] = ("blue",)
    cards: int = Field(17, ge=1, le=100)
    memorise_s: Seconds = Field(30.0, ge=0, le=3600)
    bow_call: Call = Call(text="礼", yomi="れい")
    memorise_call: Spoken = Spoken(text="札を覚えてください", yomi="ふだをおぼえてください")
    prelude: PreludeConfig = PreludeConfig()
    lower_verse_times: int = Field(1, ge=1, le=3)
    extra_call: Call = Call(text="もう一枚読みます", yomi="もういちまいよみます")
    # announces the operator's "read the last card again" (a class's teacher, on request)
    again_call: Call = Call(text="もう一度読みます", yomi="もういちどよみます")
    end_call: Call = Call(text="ありがとうございました", yomi="ありがとうございました")
    move_call: Call = Call(text="移動してください", yomi="いどうしてください")
    gaps: GapsConfig = GapsConfig()
    resume: ResumeConfig = ResumeConfig()
    # how much longer the voice holds an upper / a lower verse's last sound than speech would
    # (the reader style's hold): taken out of the gap after the verse, so the pace stays. Set
    # from the voice by the hall (audio.config.held_s), not in config.yaml.
    held_s: tuple[Seconds, Seconds] = (0.0, 0.0)

    @model_validator(mode="before")
    @classmethod
    def _call_texts(cls, data: Any) -> Any:
        """`bow_call: {enabled: false}` keeps the call's default text and reading; a new text
        needs its reading too (a missing one is named as missing)."""
        if not isinstance(data, dict):
            return data
        out = dict(data)
        for name in _CALLS:
            v = out.get(name)
            if isinstance(v, dict) and "text" not in v and "yomi" not in v:
                default = cls.model_fields[name].default
                out[name] = {"text": default.text, "yomi": default.yomi, **v}
        return out

    @field_validator("colors")
    @classmethod
    def _known_colors(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if not v:
            raise ValueError("name at least one colour")
        try:
            return tuple(parse_color(c).value for c in v)
        except BadDeck as e:
            raise ValueError(str(e)) from None

    @model_validator(mode="after")
    def _cards_fit_deck(self, info: ValidationInfo) -> Self:
        # a match built with a deck of its own has its cards checked against that deck when it
        # is built (reader/schedule.py), not against these colours
        # (with_match_overrides(own_deck=True)); config.yaml's `match` is checked here
        if info.context and info.context.get("own_deck"):
            return self
        size = 20 * len(self.colors)
        if self.cards > size:
            raise ValueError(
                f"cards is {self.cards} but the default deck ({', '.join(self.colors)}) holds "
                f"only {size} poems; lower cards or add colours"
            )
        return self


def _allowed_keys(model: type[BaseModel], loc: tuple[str | int, ...]) -> list[str] | None:
    """The field names of the model found at `loc` (the parent of an unknown key)."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        field = current.model_fields.get(part)
        if field is None:
            return None
        current = field.annotation
        args = getattr(current, "__args__", None)
        if args:  # tuple[X, ...], X | None
            current = next(
                (a for a in args if isinstance(a, type) and issubclass(a, BaseModel)), current
            )
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return None


def explain(err: ValidationError, source: str, root: type[BaseModel]) -> ConfigError:
    lines = []
    for e in err.errors():
        loc = tuple(e["loc"])
        key = ".".join(str(p) for p in loc) or "(top level)"
        if not loc:  # a check of the whole file: its message names the keys itself
            lines.append(f"{source}: {str(e['msg']).removeprefix('Value error, ')}")
        elif e["type"] == "extra_forbidden":
            allowed = _allowed_keys(root, loc[:-1])
            near = difflib.get_close_matches(str(loc[-1]), allowed or [], n=1, cutoff=0.6)
            hint = f"; did you mean {near[0]}?" if near else ""
            hint += f"; allowed keys here: {', '.join(allowed)}" if allowed else ""
            lines.append(f"{source}: {key}: unknown key{hint}")
        else:
            msg = str(e["msg"]).removeprefix("Value error, ")
            got = e.get("input")
            said = "nothing (the key is empty or null)" if got is None else repr(got)
            # a URL's password (a broker's nats://user:password@host) is never repeated
            said = re.sub(r"(://[^:/@\s]*:)[^@\s]*@", r"\1***@", said)
            said = said if len(said) <= 80 else said[:77] + "..."
            lines.append(f"{source}: {key}: {msg} (got {said})")
    return ConfigError("\n".join(lines))


def _scalars(annotation: Any) -> set[type]:
    """The scalar types a field takes (through Optional, unions, Annotated and Literal)."""
    args = getattr(annotation, "__args__", None)
    origin = getattr(annotation, "__origin__", None)
    if origin is Literal:
        return {type(a) for a in args or ()}
    if args and origin is not tuple and origin is not dict and origin is not list:
        out: set[type] = set()
        for a in args:
            out |= _scalars(a)
        return out
    if isinstance(annotation, type):
        if issubclass(annotation, str | Path):
            return {str}
        return {annotation}
    return set()


def _numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False  # pydantic says what is wrong with it
    return True


def refuse_coercions(model: type[BaseModel], data: Any, loc: tuple[str | int, ...],
                      source: str) -> None:
    """No value is coerced into a number: `true` is not a card count and "3" is not 3
    (pydantic's lax mode would take both), named by key like every other error."""
    if not isinstance(data, dict):
        return
    for key, value in data.items():
        field = model.model_fields.get(key) if isinstance(key, str) else None
        if field is None:
            continue
        ann = field.annotation
        where = (*loc, key)
        kinds = _scalars(ann)
        numeric = bool(kinds & {int, float})
        if numeric and ((isinstance(value, bool) and bool not in kinds)
                        or (isinstance(value, str) and str not in kinds and _numeric(value))):
            raise ConfigError(f"{source}: {'.'.join(map(str, where))}: Input should be a "
                              f"number, not {type(value).__name__} (got {value!r:.80})")
        for sub in (ann, *getattr(ann, "__args__", ())):
            if isinstance(sub, type) and issubclass(sub, BaseModel):
                if isinstance(value, dict):
                    refuse_coercions(sub, value, where, source)
                elif isinstance(value, list | tuple):
                    for i, item in enumerate(value):
                        refuse_coercions(sub, item, (*where, i), source)


def with_match_overrides(match: MatchConfig, overrides: dict[str, Any], *,
                         own_deck: bool = False) -> MatchConfig:
    """A match's settings with per-match overrides (same keys as config.yaml's `match`).
    `own_deck`: the match is built with a deck of its own (its colours or poems, a channel's
    colours) that bounds its cards when it is built (reader.errors.TooManyCards, with both
    figures), so they are not checked against `colors` here."""
    refuse_coercions(MatchConfig, overrides, (), "overrides")
    merged = _deep_merge(match.model_dump(mode="json"), overrides)
    try:
        return MatchConfig.model_validate(merged, context={"own_deck": own_deck})
    except ValidationError as e:
        raise explain(e, "overrides", MatchConfig) from None


def merge_overrides(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`over` on top of `base`, nested mappings merged key by key (a preset, then the form)."""
    return _deep_merge(base, over)


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = v
    return out
