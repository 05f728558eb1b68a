"""Request bodies (strict: an unknown field is a 422 naming it)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from reader.deck import SEED_MAX


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MatchRequest(Strict):
    colors: list[Annotated[str, Field(max_length=16)]] = Field(default=[], max_length=5)
    poems: list[Annotated[int, Field(ge=1, le=100)]] = Field(default=[], max_length=100)
    seed: int | None = Field(default=None, ge=0, le=SEED_MAX)
    preset: str | None = Field(default=None, max_length=32,
                               description="a preset's id (GET /api/presets); the overrides "
                                           "below go on top of it")
    overrides: dict[str, Any] = Field(default={}, description="keys of config.yaml's `match`")
    voice: dict[str, Any] = Field(default={}, max_length=3,
                                  description="the voice's speed, pitch and phrase_pause_s")


class VolumeRequest(Strict):
    volume_db: float = Field(ge=-60, le=0, description="0 is the clips' own loudness")


class JoinRequest(Strict):
    pin: str = Field(pattern=r"^[0-9]{4,8}$")
    name: str = Field(min_length=1, max_length=40)


class HoldRequest(Strict):
    name: str = Field(default="", max_length=40)


class AbortRequest(Strict):
    reason: str = Field(default="", max_length=200)
