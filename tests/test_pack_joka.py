"""A pack's own jokā (issue 21): Shuffle100's one-file 序歌 is 難波津 read upper verse, lower verse,
lower verse again. Built here from Open JTalk's speech (the repeat said at another speed and
pitch, not a copy): the pack knows its jokā is 難波津 with the lower verse read twice, the match
shows 難波津's text, and the lower verse is read once unless voice.pack_joka_repeat says twice."""

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import yaml
from fastapi.testclient import TestClient

from api.app import create_app
from audio.codec import decode, write_wav
from audio.config import VoiceConfig
from audio.pcm import Pcm, trim_noise
from audio.voices.catalogue import import_pack
from audio.voices.factory import make_voice, pack_joka
from audio.voices.openjtalk import OpenJTalkVoice
from audio.voices.pack import read_pack
from audio.voices.packjoka import JokaInfo, cut_one_file
from audio.voices.packvoice import PackVoice
from hall.config import parse_config
from hall.inbox import PrepareMatch
from hall.matchplan import plan_match
from reader.clip import Clip, ClipKind, Verse
from reader.config import PreludeConfig
from reader.joka import NANIWAZU
from reader.poems import poem
from reader.programme import build_programme

from .packs import shuffle100, wasuramoti

R = 48000
POEMS = (1, 2, 3)
PAUSE_S = 0.6
TOKEN = "operator-token-for-tests-0123456789"
OP = {"Authorization": f"Bearer {TOKEN}"}


@dataclass(frozen=True)
class Said:
    kami: Pcm  # 難波津's upper verse
    shimo: Pcm  # its lower verse
    again: Pcm  # the lower verse said again (another speed and pitch: not the same samples)
    other: Pcm  # another poem's lower verse


def prelude(verse: Verse) -> Clip:
    s = NANIWAZU.kami if verse is Verse.KAMI else NANIWAZU.shimo
    return Clip(ClipKind.PRELUDE, s.yomi, s.text, poem=0, verse=verse)


@pytest.fixture(scope="module")
def said() -> Said:
    plain = OpenJTalkVoice(R)  # the natural style: phrase pauses of 0.15 s inside each verse
    again = OpenJTalkVoice(R, speed=1.06, pitch=0.6)
    p = poem(11)
    other = Clip(ClipKind.VERSE, p.shimo_yomi, p.shimo, poem=p.no, verse=Verse.SHIMO)
    return Said(plain.render(prelude(Verse.KAMI)), plain.render(prelude(Verse.SHIMO)),
                again.render(prelude(Verse.SHIMO)), plain.render(other))


def seconds(x: Pcm) -> float:
    return trim_noise(x, R).size / R


def joka_pack(folder: Path, *parts: Pcm, name: str = "序歌.wav") -> Path:
    """A Shuffle100 pack of poems 1-3 (tones) and a one-file jokā: `parts` joined by 0.6 s
    pauses, in a room's faint noise."""
    shuffle100(folder, [(n, v) for n in POEMS for v in Verse])
    gap = np.zeros(round(PAUSE_S * R), dtype=np.float32)
    x = np.concatenate([gap, *(y for part in parts for y in (part, gap))])
    x = x + np.random.default_rng(7).normal(0, 10 ** (-60 / 20), x.size).astype(np.float32)
    write_wav(folder / name, x, R)
    return folder


def test_a_shuffle100_joka_is_naniwazu_with_its_lower_verse_read_twice(
    tmp_path: Path, said: Said,
) -> None:
    folder = joka_pack(tmp_path / "s", said.kami, said.shimo, said.again)
    assert read_pack(folder).joka == JokaInfo("naniwazu", None)  # not heard yet
    voice = PackVoice(folder, R, strict=False)
    assert voice.joka() == JokaInfo("naniwazu", True)
    assert ("jokā: recorded (one file, split at its pause): 難波津に, its lower verse read "
            "twice: read once (voice.pack_joka_repeat: false)") in voice.describe()
    cut = cut_one_file(decode(folder / "序歌.wav", R), R)
    assert cut.repeats_lower and cut.likeness is not None and cut.likeness < 0.4


def test_the_lower_verse_is_read_once_by_default_and_twice_when_set(
    tmp_path: Path, said: Said,
) -> None:
    folder = joka_pack(tmp_path / "s", said.kami, said.shimo, said.again)
    once = PackVoice(folder, R, strict=False)
    kami = once.render(prelude(Verse.KAMI))
    shimo = once.render(prelude(Verse.SHIMO))
    assert seconds(kami) == pytest.approx(seconds(said.kami), rel=0.25)
    # one lower verse (2.1 s), not two with the pause between (4.9 s: what was read before)
    assert seconds(shimo) == pytest.approx(seconds(said.shimo), rel=0.25)
    # the setting, through the config as a hall reads it
    cfg = parse_config({"voice": {"engine": "pack", "pack": str(folder),
                                  "pack_joka_repeat": True, "cache_dir": str(tmp_path / "c")}})
    assert cfg.voice.pack_joka_repeat is True
    twice = make_voice(cfg.voice, R).pcm(prelude(Verse.SHIMO))
    both = seconds(said.shimo) + seconds(said.again) + PAUSE_S
    assert seconds(twice) == pytest.approx(both, rel=0.15)
    assert seconds(twice) > 1.75 * seconds(shimo)
    default = make_voice(cfg.voice.model_copy(update={"pack_joka_repeat": False}), R)
    assert seconds(default.pcm(prelude(Verse.SHIMO))) == pytest.approx(seconds(shimo), abs=0.02)


def test_the_match_shows_naniwazu_for_the_prelude(tmp_path: Path, said: Said) -> None:
    folder = joka_pack(tmp_path / "s", said.kami, said.shimo, said.again)
    data = {"match": {"memorise_s": 1, "cards": 3},
            "voice": {"engine": "pack", "pack": str(folder), "cache_dir": str(tmp_path / "c")},
            "audio": {"output": "null"}, "journal_dir": str(tmp_path / "journal")}
    cfg = parse_config(data)
    assert cfg.match.prelude.kami.text.startswith("東海の")  # the configured Goshiki jokā
    plan = plan_match(PrepareMatch(poems=POEMS, seed=1), cfg, colors=None, deck_key=None,
                      last=None, last_voice=cfg.voice)
    assert plan.match.prelude.kami == NANIWAZU.kami and plan.match.prelude.shimo == NANIWAZU.shimo
    assert plan.match.prelude.intro == PreludeConfig().intro  # the call is the hall's own
    clips = [s.clip for s in build_programme(plan.match, POEMS, 3)
             if s.clip is not None and s.clip.kind is ClipKind.PRELUDE]
    assert [(c.text, c.yomi) for c in clips] == [
        ("難波津に 咲くやこの花 冬ごもり", "なにわづに さくやこのはな ふゆごもり"),
        ("今は春べと 咲くやこの花", "いまわはるべと さくやこのはな")]
    # what the console and the projector show while the jokā is read
    with TestClient(create_app(cfg, operator_token=TOKEN)) as c:
        r = c.post("/api/channels/main/match", json={"poems": list(POEMS), "seed": 1},
                   headers=OP)
        assert r.status_code == 200, r.text
        calls = r.json()["match"]["calls"]
        assert calls["prelude_kami"] == "難波津に 咲くやこの花 冬ごもり"
        assert calls["prelude_shimo"] == "今は春べと 咲くやこの花"


def test_a_pack_that_does_not_say_its_joka_shows_the_configured_one(tmp_path: Path) -> None:
    folder = wasuramoti(tmp_path / "w", [(n, v) for n in (0, *POEMS) for v in Verse])
    cfg = parse_config({"voice": {"engine": "pack", "pack": str(folder)}})
    assert pack_joka(cfg.voice) is None and pack_joka(VoiceConfig()) is None
    plan = plan_match(PrepareMatch(poems=POEMS), cfg, colors=None, deck_key=None, last=None,
                      last_voice=cfg.voice)
    assert plan.match.prelude == cfg.match.prelude
    assert "jokā: recorded; which poem is not said" in PackVoice(folder, R, strict=False).describe()


def test_a_joka_read_once_is_not_taken_for_a_repeat(tmp_path: Path, said: Said) -> None:
    plain = PackVoice(joka_pack(tmp_path / "a", said.kami, said.shimo), R, strict=False)
    assert plain.joka() == JokaInfo("naniwazu", False)
    assert "read twice" not in plain.describe()
    assert seconds(plain.render(prelude(Verse.SHIMO))) == pytest.approx(
        seconds(said.shimo), rel=0.25)
    # a third verse that is not the lower verse again (as long, another poem's) is no repeat
    odd = PackVoice(joka_pack(tmp_path / "b", said.kami, said.shimo, said.other), R,
                    strict=False)
    assert odd.joka() == JokaInfo("naniwazu", False)


def test_an_imported_pack_keeps_its_joka_and_reads_the_lower_verse_once(
    tmp_path: Path, said: Said,
) -> None:
    folder = joka_pack(tmp_path / "s", said.kami, said.shimo, said.again)
    out = import_pack(folder, tmp_path / "packs")
    manifest = yaml.safe_load((out / "yomite-pack.yaml").read_text("utf-8"))
    assert manifest["joka"] == {"poem": "naniwazu", "repeats_lower": True}
    assert read_pack(out).joka == JokaInfo("naniwazu", True)
    assert pack_joka(VoiceConfig(engine="pack", pack=out)) == "naniwazu"
    once = PackVoice(out, R, strict=False).render(prelude(Verse.SHIMO))
    assert seconds(once) == pytest.approx(seconds(said.shimo), rel=0.25)
    twice = PackVoice(out, R, strict=False, joka_repeat=True).render(prelude(Verse.SHIMO))
    assert seconds(twice) > 1.75 * seconds(once)
