"""Planning a match from a request to prepare one: its settings (preset, overrides, the
channel's deck), its voice's settings, its deck, and its journal's header and file name."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from audio.config import VoiceConfig, held_s, with_voice_overrides
from audio.voices.factory import pack_joka
from hall.config import Config
from hall.inbox import PrepareMatch
from reader.config import MatchConfig, merge_overrides, with_match_overrides
from reader.deck import Deck
from reader.engine import Engine
from reader.errors import ConfigError, IllegalMove
from reader.joka import JOKA_POEMS


@dataclass(frozen=True, slots=True)
class MatchPlan:
    match: MatchConfig
    voice: VoiceConfig
    deck: Deck
    cards: int | None  # the cards planned, for a replay; None: the match's own rule


def plan_match(p: PrepareMatch, config: Config, *, colors: tuple[str, ...] | None,
               deck_key: bytes | None, last: Engine | None,
               last_voice: VoiceConfig) -> MatchPlan:
    """The match `p` asks for on a channel whose deck is `colors` (None: match.colors);
    `last` and `last_voice`: the channel's last match, for a replay."""
    if p.replay:
        return _replay_of_last(p, last, last_voice)
    match_over: dict[str, Any] = {}
    voice_over: dict[str, Any] = {}
    if p.preset is not None:
        presets = config.all_presets()
        preset = presets.get(p.preset)
        if preset is None:
            raise ConfigError(f"there is no preset {p.preset!r}; presets: "
                              f"{', '.join(presets)}")
        match_over, voice_over = dict(preset.match), dict(preset.voice)
    match_over = merge_overrides(match_over, p.overrides)
    voice_over = {**voice_over, **p.voice}
    match_cfg = config.match
    # the cards are checked against the deck the match is built with (the request's colours
    # or poems, else the channel's, else match.colors), where a refusal names both figures
    # (reader.errors.TooManyCards), not against the configured colours
    if colors and "colors" not in match_over:
        match_cfg = with_match_overrides(match_cfg, {"colors": list(colors)}, own_deck=True)
    if match_over:
        match_cfg = with_match_overrides(match_cfg, match_over, own_deck=True)
    voice_cfg = with_voice_overrides(config.voice, voice_over)
    match_cfg = as_read_by(match_cfg, voice_cfg)
    deck_colors = p.colors or (() if p.poems else match_cfg.colors)
    deck = Deck.build(colors=deck_colors, poems=p.poems, seed=p.seed, key=deck_key)
    return MatchPlan(match_cfg, voice_cfg, deck, None)


def as_read_by(match: MatchConfig, voice: VoiceConfig) -> MatchConfig:
    """The match's settings as `voice` reads them: the held last sounds of its style come out
    of the gaps (audio.config.held_s), and a pack that reads a jokā of its own (Shuffle100's
    難波津) shows that poem's text for the jokā, not the configured one's."""
    update: dict[str, Any] = {"held_s": held_s(voice)}
    joka = JOKA_POEMS.get(pack_joka(voice) or "")
    if joka is not None:
        update["prelude"] = match.prelude.model_copy(
            update={"kami": joka.kami, "shimo": joka.shimo})
    return match.model_copy(update=update)


def _replay_of_last(p: PrepareMatch, last: Engine | None, last_voice: VoiceConfig) -> MatchPlan:
    """The last match's settings, voice, deck and order (感想戦)."""
    if p.colors or p.poems or p.seed is not None or p.overrides or p.voice or p.preset:
        raise ConfigError("a replay reads the last match as it was: send no deck, seed, "
                          "preset or overrides with it")
    if last is None:
        raise IllegalMove("replay the last match", "no match has been read on this channel",
                          "prepare and read a match first")
    return MatchPlan(last.match, last_voice, last.deck, last.cards_planned)


def journal_header(engine: Engine, *, channel: str, voice: VoiceConfig,
                   preset: str | None) -> dict[str, Any]:
    """The journal's first line: the engine's header, when, where, and the voice the match
    reads with (so that a recovered match reads with the same one)."""
    header = engine.header()
    header["wall"] = datetime.now(UTC).isoformat()
    header["channel"] = channel
    header["voice"] = voice.model_dump(mode="json")
    header["preset"] = preset
    return header


def journal_path(directory: Path, deck: Deck) -> Path:
    """A new match's journal: named by UTC time to the microsecond, so the newest sorts last."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%f")
    return directory / f"{stamp}-seed{deck.seed}.jsonl"
