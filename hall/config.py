"""The hall's settings (`server`: channels, speakers, security, limits, referees), the presets,
and the whole config.yaml assembled from every layer's part (reader, audio, desk, hall)."""

import ipaddress
import os
from pathlib import Path
from typing import Annotated, Any, Literal, Self

import yaml
from pydantic import Field, ValidationError, field_validator, model_validator

from audio.config import AudioConfig, VoiceConfig, with_voice_overrides
from desk.config import DeskConfig
from hall.clusterconfig import ClusterConfig, short_path
from reader.config import Frozen, MatchConfig, explain, refuse_coercions, with_match_overrides
from reader.deck import parse_color
from reader.errors import BadDeck, ConfigError

CONFIG_ENV = "YOMITE_CONFIG"


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
    # per guesser and channel: a guesser is a phone that joined with this PIN before (its
    # pass, a cookie), else an address (an IPv6 one by its /64). Each also waits after its own
    # wrong PINs: none after the first, then 2 s, doubling up to an hour (hall.pinlock)
    pin_attempts_per_minute: int = Field(10, ge=1, le=1000)
    # wrong PINs a minute, from all guessers without a pass together, before the channel's
    # join locks, until they are a minute old
    pin_failures_per_channel_minute: int = Field(30, ge=1, le=10000)
    # and in an hour (a guesser that keeps under the minute's count locks it too): together
    # they bound guessing to ~30 PINs an hour. A lock refuses only the guessers that sent
    # more than one wrong PIN: never a phone with a pass, a typist's single mistake, or anyone
    # with the right PIN who sent no wrong one.
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
    # anonymous viewers' WebSockets (no token of the hall's own: not the operator, a referee,
    # a speaker or a projector link) held at once, in all: lowered at start to half the
    # connections, so that the other half is always the hall's own and the pages' requests'
    viewer_sockets: int = Field(2000, ge=8, le=100000)
    # ... and from one client address; a new one past it takes the place of the address's
    # least recently heard-from (a phone reconnecting before its old socket is noticed gone)
    viewer_sockets_per_address: int = Field(8, ge=1, le=100000)
    # an IPv6 /64 (what one host may take addresses from, or a whole LAN) counts as one
    # address with this many times an address's caps (connections, viewers, requests)
    ipv6_net_addresses: int = Field(8, ge=1, le=65536)
    # requests without a token of the hall's own (GET and HEAD, and WebSocket handshakes) per
    # client address and second, with bursts: past them 429 with Retry-After. A phone loading
    # a page makes about ten
    anonymous_requests_per_s: float = Field(20.0, gt=0, le=100000)
    anonymous_requests_burst: int = Field(120, ge=1, le=1000000)
    # addresses not capped per address (connections, viewers' sockets, anonymous requests):
    # the server's own machine (its console, projector and speaker pages, benches);
    # server.security.trusted_proxies are not capped either
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
    # WebSockets one referee holds at once (its phone, and one more while it reconnects)
    sockets_each: int = Field(4, ge=1, le=1000)
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
    # a page's hold older than this when it arrives (its at_s), or meant for a card or verse
    # left more than press_grace_s before it arrived, is refused: press_stale (docs/api.md)
    press_max_age_s: float = Field(2.0, ge=0.2, le=60)
    press_grace_s: float = Field(1.0, ge=0, le=10)


class RoomsConfig(Frozen):
    """Rooms opened on demand by organisations (docs/rooms.md): the quotas an organisation gets
    unless the admin gives it others, and when an unused room closes itself."""

    # a room with no match being read and no client for this long closes itself (its history
    # is kept); null: rooms close only when told to
    idle_close_min: int | None = Field(120, ge=1, le=43200)
    # rooms one organisation may hold open at once (the admin may give one another figure)
    max_open_per_org: int = Field(20, ge=1, le=1000)
    # viewers' pages connected to one room at once (with its viewer link); the class's own
    # pages (its operators' consoles, referees, speakers, projector) are not counted
    max_clients_per_room: int = Field(60, ge=2, le=10000)
    # pages of a room's projector link at once (its projector, a second screen); the
    # projector is one of the class's own pages, not counted in max_clients_per_room
    max_projectors_per_room: int = Field(4, ge=1, le=1000)
    # rooms open at once on this server, all organisations together
    max_open: int = Field(200, ge=1, le=10000)
    # closed rooms stay listed (with their history) for this many days
    closed_kept_days: int = Field(30, ge=0, le=3650)


class ServerConfig(Frozen):
    host: str = "0.0.0.0"
    port: int = Field(8080, ge=1, le=65535)
    # The address phones use (a hall behind a reverse proxy, or a name on the hall's DNS);
    # null: the address of this machine's default-route interface.
    public_url: str | None = Field(None, pattern=r"^https?://[^\s/?#]+(/[^\s?#]*)?$",
                                   max_length=200)
    # https (docs/tls.md). On an address other than loopback the server makes and keeps its
    # own certificate authority (journal_dir/tls/) and serves https with a certificate it
    # signs, unless given an association's real certificate here (PEM: the chain, the
    # server's first, and its unencrypted key; --tls-cert/--tls-key). On loopback: plain http
    # unless a certificate is given.
    tls_cert: Path | None = None
    tls_key: Path | None = None
    # plain http on the network (--insecure-http): PINs, tokens and the speaker key travel
    # in clear, and every page says so; for a hall whose network is its own
    insecure_http: bool = False
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

    @field_validator("tls_cert", "tls_key")
    @classmethod
    def _tls_path(cls, v: Path | None) -> Path | None:
        return short_path(v)

    @model_validator(mode="after")
    def _tls_pair(self) -> Self:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("tls_cert and tls_key go together (the certificate and its key)")
        if self.tls_cert is not None and self.insecure_http:
            raise ValueError("insecure_http serves plain http: leave it out with a "
                             "certificate (tls_cert), or leave the certificate out")
        return self

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
    rooms: RoomsConfig = RoomsConfig()
    cluster: ClusterConfig = ClusterConfig()
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


def parse_config(data: Any, source: str = "config") -> Config:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping of sections, not {data!r}")
    refuse_coercions(Config, data, (), source)
    try:
        return Config.model_validate(data)
    except ValidationError as e:
        raise explain(e, source, Config) from None


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
