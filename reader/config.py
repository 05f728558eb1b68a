"""Typed configuration, loaded once from config.yaml into frozen models.

An unknown key, a wrong type or an impossible value raises ConfigError naming the key (its
dotted path) and what is allowed there. Units are in the names (`_s` seconds, `_ms`).
"""

import os
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal, Self

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .deck import parse_color
from .errors import BadDeck, ConfigError

CONFIG_ENV = "YOMITE_CONFIG"


class Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Spoken(Frozen):
    """A call or the jokā: `text` is shown, `yomi` (kana) is what the voice says."""

    text: str = Field(min_length=1, max_length=200)
    yomi: str = Field(min_length=1, max_length=200)


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


_CALLS = ("bow_call", "memorise_call", "extra_call", "end_call", "move_call")


class MatchConfig(Frozen):
    colors: tuple[str, ...] = ("blue",)
    cards: int = Field(17, ge=1, le=100)
    memorise_s: Seconds = Field(30.0, ge=0, le=3600)
    bow_call: Call = Call(text="礼", yomi="れい")
    memorise_call: Spoken = Spoken(text="札を覚えてください", yomi="ふだをおぼえてください")
    prelude: PreludeConfig = PreludeConfig()
    lower_verse_times: int = Field(1, ge=1, le=3)
    extra_call: Call = Call(text="もう一枚読みます", yomi="もういちまいよみます")
    end_call: Call = Call(text="ありがとうございました", yomi="ありがとうございました")
    move_call: Call = Call(text="移動してください", yomi="いどうしてください")
    gaps: GapsConfig = GapsConfig()
    resume: ResumeConfig = ResumeConfig()

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
    def _cards_fit_deck(self) -> Self:
        size = 20 * len(self.colors)
        if self.cards > size:
            raise ValueError(
                f"cards is {self.cards} but the default deck ({', '.join(self.colors)}) holds "
                f"only {size} poems; lower cards or add colours"
            )
        return self


class VoiceEngine(StrEnum):
    OPENJTALK = "openjtalk"
    PYTTSX3 = "pyttsx3"
    PACK = "pack"
    ESTIMATE = "estimate"  # silence of the estimated length: dry runs


class VoiceConfig(Frozen):
    engine: VoiceEngine = VoiceEngine.OPENJTALK
    # 1.0 and 0.15 s read a poem (kami, 1 s, shimo, 1.5 s) in 7.06 s on average with Open JTalk:
    # the national rules' pace (bench/voice_render.py measures it over the hundred poems)
    speed: float = Field(1.0, gt=0.2, le=3.0)
    pitch: float = Field(0.0, ge=-12, le=12)  # semitones
    phrase_pause_s: Seconds = Field(0.15, ge=0, le=5)
    loudness_lufs: float = Field(-20.0, ge=-60, le=-5)
    pack: Path | None = None
    pack_fallback: bool = False
    # seconds of speech a poem (upper + lower verse) a pack is time-stretched to, pitch kept;
    # null keeps the reader's own pace (or the pack manifest's pace_s)
    pack_pace_s: Seconds | None = Field(None, ge=1, le=60)
    # where the recording page (/record) keeps the pack it records
    recording_pack: Path = Path("var/packs/recorded")
    cache_dir: Path = Path("var/cache")


class AudioConfig(Frozen):
    rate: int = Field(48000, ge=8000, le=192000)
    output: Literal["device", "null"] = "device"
    device: str | int | None = None
    blocksize: int = Field(256, ge=32, le=8192)
    latency: Literal["low", "high"] | float = "low"
    fade_ms: float = Field(2.0, ge=0, le=100)
    schedule_lead_ms: float = Field(30.0, ge=0, le=1000)
    process: bool = True
    render_workers: int | None = Field(None, ge=0, le=64)


class ChannelConfig(Frozen):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,31}$")
    device: str | int | None = None
    colors: tuple[str, ...] | None = None


class SecurityConfig(Frozen):
    operator_token: str | None = Field(None, min_length=16)
    allowed_origins: tuple[str, ...] = ()
    pin_attempts_per_minute: int = Field(10, ge=1, le=1000)


class ServerConfig(Frozen):
    host: str = "0.0.0.0"
    port: int = Field(8080, ge=1, le=65535)
    # The address phones use (a hall behind a reverse proxy, or a name on the hall's DNS);
    # null: the address of this machine's default-route interface.
    public_url: str | None = Field(None, pattern=r"^https?://[^\s/?#]+(/[^\s?#]*)?$",
                                   max_length=200)
    channels: tuple[ChannelConfig, ...] = (ChannelConfig(name="main"),)
    security: SecurityConfig = SecurityConfig()
    client_queue: int = Field(64, ge=1, le=10000)
    hold_debounce_ms: float = Field(0.0, ge=0, le=5000)
    nice: int = Field(-10, ge=-20, le=19)

    @field_validator("channels")
    @classmethod
    def _unique_channels(cls, v: tuple[ChannelConfig, ...]) -> tuple[ChannelConfig, ...]:
        if not v:
            raise ValueError("declare at least one channel")
        names = [c.name for c in v]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"channel names must be unique; repeated: {', '.join(sorted(dup))}")
        return v


class Config(Frozen):
    match: MatchConfig = MatchConfig()
    voice: VoiceConfig = VoiceConfig()
    audio: AudioConfig = AudioConfig()
    server: ServerConfig = ServerConfig()
    journal_dir: Path = Path("var/journal")


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


def explain(err: ValidationError, source: str, root: type[BaseModel] = Config) -> ConfigError:
    lines = []
    for e in err.errors():
        loc = tuple(e["loc"])
        key = ".".join(str(p) for p in loc) or "(top level)"
        if e["type"] == "extra_forbidden":
            allowed = _allowed_keys(root, loc[:-1])
            hint = f"; allowed keys here: {', '.join(allowed)}" if allowed else ""
            lines.append(f"{source}: {key}: unknown key{hint}")
        else:
            msg = str(e["msg"]).removeprefix("Value error, ")
            lines.append(f"{source}: {key}: {msg} (got {e.get('input')!r})")
    return ConfigError("\n".join(lines))


def parse_config(data: Any, source: str = "config") -> Config:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping of sections, not {data!r}")
    try:
        return Config.model_validate(data)
    except ValidationError as e:
        raise explain(e, source) from None


def load_config(path: str | os.PathLike[str] | None = None) -> Config:
    """Load config.yaml: the given path, else $YOMITE_CONFIG, else ./config.yaml, else defaults."""
    chosen = path or os.environ.get(CONFIG_ENV)
    p = Path(chosen) if chosen else Path("config.yaml")
    if not p.exists():
        if chosen:
            raise ConfigError(f"{p}: no such config file")
        return Config()
    try:
        data = yaml.safe_load(p.read_text("utf-8"))
    except yaml.YAMLError as e:
        raise ConfigError(f"{p}: not valid YAML: {e}") from None
    return parse_config(data, str(p))


def with_match_overrides(match: MatchConfig, overrides: dict[str, Any]) -> MatchConfig:
    """A match's settings with per-match overrides (same keys as config.yaml's `match`)."""
    merged = _deep_merge(match.model_dump(mode="json"), overrides)
    try:
        return MatchConfig.model_validate(merged)
    except ValidationError as e:
        raise explain(e, "overrides", MatchConfig) from None


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = v
    return out
