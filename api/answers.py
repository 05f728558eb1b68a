"""What the hall's routes answer besides a channel's state (api/models.py): health, reference
data, presets, the recording studio's progress; typed for the OpenAPI schema, extra keys
allowed (a newer server may say more)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from api.models import Open

# a JSON number that is sometimes whole: typed as both so that validating keeps 3 as 3 (a
# `float` field would answer 3.0)
Number = int | float


# ---------------------------------------------------------------------------- reference
class RenderWait(Open):
    clip: str
    ms: float


class ChannelHealth(Open):
    output: str = Field(description="the output's kind and whether it is up")
    output_stats: dict[str, int] | None
    audio: str | None = Field(description='"ok", "no_device" or "fault: ..."')
    journal: str | None
    fault: str | None
    clients: int
    direct_clients: int = Field(description="clients written to straight from the hub")
    runtime: str = Field(description="running or stopped")
    dropped_clients: int
    fanout_lag_ms: dict[str, Number] | None
    recent_publishes: list[Any] = Field(description="[seq, when] of the last states sent")


class HealthCacheCounts(Open):
    answers_made: int = Field(description="answers made since start (others were kept)")
    channel_parts_made: int = Field(description="channel parts made since start: a part is "
                                    "made again only when its channel changed")


class RoomsHealth(Open):
    open: int
    clients: int


class Health(Open):
    status: str
    event_loop: dict[str, Any] = Field(description="the loop watch's report and scheduling")
    gc: dict[str, Any] | None
    render_waits: list[RenderWait]
    cache: HealthCacheCounts | None = Field(None, description="what making answers cost")
    rooms: RoomsHealth | None = Field(None, description="the organisations' rooms, counted "
                                      "(their names are their operators' to give)")
    channels: dict[str, ChannelHealth] = Field(description="the last field (its parts are "
                                               "kept as JSON and put in as they are)")


class PoemAnswer(Open):
    no: int
    author: str
    kami: str
    shimo: str
    kami_kana: str
    shimo_kana: str
    kami_yomi: str
    shimo_yomi: str
    kimariji: str
    color: str


class VoicesAnswer(Open):
    current: str
    voices: list[dict[str, str | bool]] = Field(description="one per engine: engine, "
                                                "available, detail, selected")


class DevicesAnswer(Open):
    devices: list[dict[str, Any]]
    error: str | None = Field(None, description="why the devices cannot be listed")


class WsProtocolAnswer(Open):
    """A JSON Schema document with both directions of /ws/channels/{ch}."""

    json_schema_dialect: str = Field(alias="$schema")
    title: str
    description: str
    server_to_client: dict[str, Any]
    client_to_server: dict[str, Any]


class SessionAnswer(Open):
    role: str = Field(description="viewer, referee, speaker or operator")
    channel: str | None
    referee: str | None
    name: str | None
    org: str | None = Field(None, description="an organisation's operator: its organisation "
                            "(it operates that organisation's rooms only); null for the admin")


# ---------------------------------------------------------------------------- channels
class PresetSets(Open):
    match: dict[str, Any]
    voice: dict[str, Any]


class PresetAnswer(Open):
    id: str
    label: str
    label_en: str
    description: str
    description_en: str
    sets: PresetSets = Field(description="the keys the preset sets")
    match: dict[str, Any] = Field(description="the match settings it gives")
    voice: dict[str, Any] = Field(description="the voice settings it gives")


class TlsAnswer(Open):
    mode: str = Field(description="own_ca: https with this server's own certificate "
                      "authority; certificate: https with a certificate it was given; "
                      "insecure: plain http on the network (--insecure-http); plain: plain "
                      "http on loopback only")
    https: bool
    ca_url: str | None = Field(description="where a phone downloads the CA to trust it "
                               "(plain http, so that it opens before the phone trusts it); "
                               "own_ca only")
    fingerprint_sha256: str | None = Field(description="the CA's SHA-256 (own_ca), or the "
                                           "given certificate's, AB:CD:… as settings show it")
    uncovered: list[str] = Field(description="names and addresses the CA may not vouch for "
                                 "(docs/tls.md: make a new CA, or use a real certificate)")


class RemovedReferee(Open):
    removed: str
    channel: str


# ---------------------------------------------------------------------------- recording
class RecordingLimits(Open):
    max_upload_bytes: int
    types: list[str]


class RecordingState(Open):
    folder: str
    slots: list[dict[str, Any]] = Field(description="each slot: text, kana, colour, "
                                        "recorded, speech_s")
    progress: dict[str, Any]
    limits: RecordingLimits


class TakeSaved(Open):
    take: dict[str, Any] = Field(description="the take's report: speech_s, peak_dbfs, ...")
    progress: dict[str, Any]


class RecordingProgress(Open):
    progress: dict[str, Any]
