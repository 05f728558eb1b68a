"""Typed configuration, loaded once from config.yaml into frozen models.

An unknown key, a wrong type or an impossible value raises ConfigError naming the key (its
dotted path) and what is allowed there. Units are in the names (`_s` seconds, `_ms`).
"""

import difflib
import ipaddress
import os
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal, Self

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .deck import parse_color
from .errors import BadDeck, ConfigError
from .text import check_yomi, clean_text

CONFIG_ENV = "YOMITE_CONFIG"


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
    # `output: null` in YAML is no value at all: read as "null" (no sound), as written
    output: Literal["device", "null"] = "device"
    device: str | int | None = None
    blocksize: int = Field(256, ge=32, le=8192)
    latency: Literal["low", "high"] | float = "low"
    fade_ms: float = Field(2.0, ge=0, le=100)
    schedule_lead_ms: float = Field(30.0, ge=0, le=1000)
    process: bool = True
    render_workers: int | None = Field(None, ge=0, le=64)
    # how soon an idle CPU must wake while the audio process plays, in µs (a PM QoS request
    # where allowed: audio/output/wakeup.py); null leaves the machine's idle policy alone
    cpu_wakeup_us: int | None = Field(0, ge=0, le=100_000)

    @field_validator("output", mode="before")
    @classmethod
    def _null_is_no_sound(cls, v: Any) -> Any:
        return "null" if v is None else v


ChannelOutput = Literal["device", "browser", "both"]


class ChannelConfig(Frozen):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,31}$")
    device: str | int | None = None
    # this channel's deck when a match names none (null: match.colors)
    colors: tuple[str, ...] | None = None
    # device: the server's sound card; browser: the /speaker pages (the engine then runs on a
    # wall clock); both: the sound card, and the speaker pages follow its clock
    output: ChannelOutput = "device"
    volume_db: float = Field(0.0, ge=-60, le=0)  # the channel's volume (the console changes it)

    @field_validator("colors")
    @classmethod
    def _known_colors(cls, v: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if v is None:
            return None
        if not v:
            raise ValueError("name at least one colour, or leave colors out")
        try:
            return tuple(parse_color(c).value for c in v)
        except BadDeck as e:
            raise ValueError(str(e)) from None


class SpeakersConfig(Frozen):
    """The browser speakers (/speaker/{channel})."""

    # the first clip after a start or an extra card is sent this far ahead on a channel with
    # browser speakers, so that a page has fetched and decoded it before it is due
    lead_ms: float = Field(500.0, ge=0, le=5000)
    # speaker pages per channel (each costs the server one message per clip)
    max_per_channel: int = Field(64, ge=1, le=1000)
    # a clip's Opus bit rate: speech is transparent from ~32 kbit/s
    bitrate_kbps: int = Field(48, ge=16, le=256)


class SecurityConfig(Frozen):
    operator_token: str | None = Field(None, min_length=16)
    allowed_origins: tuple[str, ...] = ()
    # names (besides IP addresses, localhost, this machine's names and public_url's host)
    # that the server answers to: anything else is refused (DNS rebinding)
    allowed_hosts: tuple[Annotated[str, Field(pattern=r"^[A-Za-z0-9.-]{1,253}$")], ...] = ()
    # proxies whose X-Forwarded-For / X-Forwarded-Proto are believed; none by default, so
    # that no process on this machine can pose as many clients to guess a PIN
    trusted_proxies: tuple[str, ...] = ()
    pin_digits: int = Field(6, ge=6, le=12)
    pin_attempts_per_minute: int = Field(10, ge=1, le=1000)  # per client and channel
    # wrong PINs a minute, from all clients together, before the channel's join locks
    # for a minute, then twice as long each time it locks again within the hour
    pin_failures_per_channel_minute: int = Field(30, ge=1, le=10000)
    # and in an hour (a guesser that keeps under the minute's count locks it too): together
    # they bound guessing to ~30 PINs an hour. A lock refuses only the addresses that sent a
    # wrong PIN (an IPv6 address by its /64); a referee with the right PIN is let in.
    pin_failures_per_channel_hour: int = Field(30, ge=1, le=100000)

    @field_validator("trusted_proxies")
    @classmethod
    def _addresses(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for a in v:
            try:
                ipaddress.ip_network(a, strict=False)
            except ValueError:
                raise ValueError(f"{a!r} is not an IP address or network") from None
        return v


class LimitsConfig(Frozen):
    """What one request may carry: a match's request is under 3 KB, a browser's headers
    under 2 KB."""

    body_bytes: int = Field(32768, ge=1024, le=10_000_000)
    header_bytes: int = Field(16384, ge=1024, le=1_000_000)
    headers: int = Field(64, ge=8, le=1000)
    # messages a WebSocket of a referee or viewer may send (pings included), with bursts;
    # past the rate the socket is read more slowly, and past a second burst it is closed
    ws_messages_per_s: float = Field(50.0, gt=0, le=10000)
    ws_burst: int = Field(200, ge=1, le=100000)
    # A connection's request head (request line and headers) must arrive within this many
    # seconds of the connection's start, or of its first byte after a response; a body that
    # stops coming for as long is answered 408. A phone's head is one packet.
    request_head_s: float = Field(10.0, ge=0.5, le=300)
    # a kept-alive connection with no new request for this long is closed
    keep_alive_s: float = Field(5.0, ge=0.5, le=300)
    # the server pings each WebSocket this often, and closes one that does not answer within
    # as long (every browser and WebSocket library answers by itself)
    ws_ping_s: float = Field(20.0, ge=0.5, le=300)
    # connections held at once, in all: lowered at start to the open-files limit less a
    # reserve (a quarter, at least 256) that the journal and the desk's database always have
    connections: int = Field(4000, ge=16, le=100000)
    # connections held at once from one client address (a phone's browser opens up to 6, and
    # a page's WebSocket); a new one past the cap takes the place of the address's oldest
    # idle one, or is refused (503) if none is idle
    connections_per_address: int = Field(32, ge=2, le=100000)
    # addresses not capped per address: the server's own machine (its console, projector and
    # speaker pages, benches); server.security.trusted_proxies are not capped either
    connections_exempt: tuple[str, ...] = ("127.0.0.1", "::1")

    @field_validator("connections_exempt")
    @classmethod
    def _exempt_addresses(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for a in v:
            try:
                ipaddress.ip_network(a, strict=False)
            except ValueError:
                raise ValueError(f"{a!r} is not an IP address or network") from None
        return v


class RefereesConfig(Frozen):
    max_per_channel: int = Field(100, ge=1, le=10000)
    # a referee's hand may go down this often, with bursts of `changes_burst` (up is never
    # delayed); faster changes (a bouncing thumb, a script) wait, and the last one counts
    changes_per_s: float = Field(2.0, gt=0, le=100)
    changes_burst: int = Field(8, ge=1, le=1000)
    # and all of a channel's referees together, applied one at a time: a crowd of scripts
    # cannot make the journal write more than this, nor queue a hold behind its own changes
    channel_changes_per_s: float = Field(4.0, gt=0, le=1000)
    channel_changes_burst: int = Field(8, ge=1, le=10000)
    # false: referees who joined on an earlier day are forgotten at start (tokens die)
    keep_across_days: bool = False


class ServerConfig(Frozen):
    host: str = "0.0.0.0"
    port: int = Field(8080, ge=1, le=65535)
    # The address phones use (a hall behind a reverse proxy, or a name on the hall's DNS);
    # null: the address of this machine's default-route interface.
    public_url: str | None = Field(None, pattern=r"^https?://[^\s/?#]+(/[^\s?#]*)?$",
                                   max_length=200)
    channels: tuple[ChannelConfig, ...] = (ChannelConfig(name="main"),)
    security: SecurityConfig = SecurityConfig()
    limits: LimitsConfig = LimitsConfig()
    referees: RefereesConfig = RefereesConfig()
    client_queue: int = Field(64, ge=1, le=10000)
    hold_debounce_ms: float = Field(0.0, ge=0, le=5000)
    speakers: SpeakersConfig = SpeakersConfig()
    nice: int = Field(-10, ge=-20, le=19)
    # The event loop's thread real-time (SCHED_RR at this priority) where allowed, below the
    # audio process (4) and the sound server; 0: ordinary scheduling at `nice`.
    realtime_priority: int = Field(1, ge=0, le=3)

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


class DeskConfig(Frozen):
    """The tournament desk (desk/, /desk): its database and its limits."""

    # An SQLAlchemy URL. The default is an SQLite file under var/ (relative to the directory
    # the server runs in); e.g. postgresql+psycopg://user:pw@host/yomite for a server of one's
    # own (with its driver installed).
    database_url: str = Field("sqlite:///var/desk.sqlite3", min_length=1, max_length=500,
                              pattern=r"^[A-Za-z][A-Za-z0-9+_.-]*://")
    rounds: int = Field(6, ge=1, le=20)  # preliminary rounds of a new tournament
    max_upload_kb: int = Field(1024, ge=1, le=65536)  # a CSV or JSON file sent to the desk
    long_poll_s: float = Field(25.0, ge=1, le=120)  # a live page's wait for the next change


# What a match may change of the voice (the console's voice speed): never the engine, the pack
# or the cache folder, which are the installation's
VOICE_MATCH_KEYS: tuple[str, ...] = ("speed", "pitch", "phrase_pause_s")


class Preset(Frozen):
    """A one-tap set of match settings (the console's 大会 / 授業 / 初めて and the organisers'
    own): `match` takes the keys of `match` (as per-match overrides do), `voice` those of
    VOICE_MATCH_KEYS. What a preset leaves out comes from the configuration."""

    label: str = Field(min_length=1, max_length=40)
    label_en: str | None = Field(None, min_length=1, max_length=40)
    description: str = Field("", max_length=300)
    description_en: str = Field("", max_length=300)
    match: dict[str, Any] = Field(default_factory=dict)
    voice: dict[str, Any] = Field(default_factory=dict)


PRESET_ID = r"^[a-z0-9][a-z0-9_-]{0,31}$"

# The built-in presets. 大会 is the Hiroshima tournament's rules (../shared/rules: 30 s to
# memorise, 17 cards, each verse once, the national pace); 授業 and 初めて are for classes.
BUILTIN_PRESETS: dict[str, Preset] = {
    "tournament": Preset(
        label="大会", label_en="Tournament",
        description="広島大会の規定: 暗記 30 秒、17 枚、下の句 1 回、ふつうの速さ",
        description_en="The Hiroshima rules: 30 s to memorise, 17 cards, lower verse once, "
                       "the national pace",
        match={"memorise_s": 30, "cards": 17, "lower_verse_times": 1,
               "gaps": {"after_call_s": 1.0, "between_verses_s": 1.0, "between_cards_s": 1.5,
                        "repeat_s": 1.0}},
        voice={"speed": 1.0, "phrase_pause_s": 0.15}),
    "classroom": Preset(
        label="授業", label_en="Class",
        description="下の句を 2 回、暗記 60 秒、少しゆっくり",
        description_en="Lower verse twice, 60 s to memorise, a slower voice",
        match={"memorise_s": 60, "lower_verse_times": 2},
        voice={"speed": 0.85}),
    "beginner": Preset(
        label="初めて", label_en="First time",
        description="下の句を 2 回、暗記 90 秒、もっとゆっくり、間を長く",
        description_en="Lower verse twice, 90 s to memorise, slower still, longer gaps",
        match={"memorise_s": 90, "lower_verse_times": 2,
               "gaps": {"between_verses_s": 2.0, "between_cards_s": 3.0, "repeat_s": 1.5}},
        voice={"speed": 0.7, "phrase_pause_s": 0.3}),
}


class Config(Frozen):
    match: MatchConfig = MatchConfig()
    voice: VoiceConfig = VoiceConfig()
    audio: AudioConfig = AudioConfig()
    server: ServerConfig = ServerConfig()
    desk: DeskConfig = DeskConfig()
    journal_dir: Path = Path("var/journal")
    # organisers' presets, beside (or instead of, with the same id) the built-in ones
    presets: dict[str, Preset] = Field(default_factory=dict, max_length=32)

    @field_validator("presets")
    @classmethod
    def _preset_ids(cls, v: dict[str, Preset]) -> dict[str, Preset]:
        import re

        for k in v:
            if not re.fullmatch(PRESET_ID, k):
                raise ValueError(f"preset id {k!r}: use lower-case letters, digits, - and _ "
                                 "(at most 32)")
        return v

    @model_validator(mode="after")
    def _presets_apply(self) -> Self:
        for pid, p in self.presets.items():
            try:
                with_match_overrides(self.match, p.match)
            except ConfigError as e:
                raise ValueError(str(e).replace("overrides: ", f"presets.{pid}.match.")) from None
            try:
                with_voice_overrides(self.voice, p.voice)
            except ConfigError as e:
                raise ValueError(str(e).replace("overrides: ", f"presets.{pid}.")) from None
        return self

    def all_presets(self) -> dict[str, Preset]:
        """The built-in presets, then the organisers' (the same id replaces a built-in)."""
        return {**BUILTIN_PRESETS, **self.presets}


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
            said = said if len(said) <= 80 else said[:77] + "..."
            lines.append(f"{source}: {key}: {msg} (got {said})")
    return ConfigError("\n".join(lines))


def parse_config(data: Any, source: str = "config") -> Config:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping of sections, not {data!r}")
    _refuse_coercions(Config, data, (), source)
    try:
        return Config.model_validate(data)
    except ValidationError as e:
        raise explain(e, source) from None


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


def _refuse_coercions(model: type[BaseModel], data: Any, loc: tuple[str | int, ...],
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
                    _refuse_coercions(sub, value, where, source)
                elif isinstance(value, list | tuple):
                    for i, item in enumerate(value):
                        _refuse_coercions(sub, item, (*where, i), source)


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
    _refuse_coercions(MatchConfig, overrides, (), "overrides")
    merged = _deep_merge(match.model_dump(mode="json"), overrides)
    try:
        return MatchConfig.model_validate(merged)
    except ValidationError as e:
        raise explain(e, "overrides", MatchConfig) from None


def with_voice_overrides(voice: VoiceConfig, overrides: dict[str, Any]) -> VoiceConfig:
    """A match's voice: the configured one with per-match `overrides` (VOICE_MATCH_KEYS)."""
    for k in overrides:
        if k not in VOICE_MATCH_KEYS:
            raise ConfigError(f"overrides: voice.{k}: cannot be changed per match; allowed keys "
                              f"here: {', '.join(VOICE_MATCH_KEYS)}")
    merged = {**voice.model_dump(mode="json"), **overrides}
    try:
        return _VoiceOnly.model_validate({"voice": merged}).voice
    except ValidationError as e:
        raise explain(e, "overrides", _VoiceOnly) from None


class _VoiceOnly(Frozen):
    voice: VoiceConfig


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
