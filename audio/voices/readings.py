"""How each phrase of a clip is said, for any engine: its readings (words, accents, morae) and
its spoken form (the morae as said, long vowels as ー)."""

import logging

from audio.voices import pronunciation
from audio.voices.pronunciation import Reading
from audio.voices.voice import phrases
from reader.clip import Clip, ClipKind, Verse
from reader.poems import poem

log = logging.getLogger(__name__)


def clip_readings(clip: Clip) -> list[Reading]:
    """How each phrase of `clip` is said (see `audio.voices.pronunciation`): its text analysed by
    the dictionary, its morae the yomi's. A verse of the hundred also gives its historical kana
    (long vowels in misread words). Text and yomi with different phrase counts are read from
    the kana alone, and logged."""
    yomi = phrases(clip)
    text = clip.text.split()
    kana: list[str | None] = [None] * len(yomi)
    if clip.kind is ClipKind.VERSE and clip.poem is not None and 1 <= clip.poem <= 100:
        p = poem(clip.poem)
        own_yomi, own_kana = ((p.kami_yomi, p.kami_kana) if clip.verse is Verse.KAMI
                              else (p.shimo_yomi, p.shimo_kana))
        if own_yomi.split() == yomi and len(own_kana.split()) == len(yomi):
            kana = list(own_kana.split())
    if len(text) != len(yomi):
        log.warning("clip %s: text %r has %d phrases, yomi %r has %d: reading from the kana "
                    "alone", clip.key, clip.text, len(text), clip.yomi, len(yomi))
        text = yomi
    out = [pronunciation.read(t, y, k) for t, y, k in zip(text, yomi, kana, strict=True)]
    for i, r in enumerate(out):
        if r.fallback is not None:
            log.info("clip %s phrase %d (%s): read from the kana alone: %s",
                     clip.key, i + 1, r.yomi, r.fallback)
    return out


def spoken_phrases(clip: Clip) -> list[str]:
    """Each phrase of `clip` as it is said, in hiragana with ー for a long vowel: what an engine
    that reads kana letter by letter (espeak-ng) must be given, or it says おう, えい as two
    vowels. A phrase read from the kana alone (no words: `Reading.fallback`) is its yomi."""
    return [hiragana(r.spoken) or r.yomi for r in clip_readings(clip)]  # (kana alone: as is)


def hiragana(kana: str) -> str:
    """Katakana made hiragana (ー and anything else kept)."""
    return "".join(chr(ord(c) - 0x60) if "ァ" <= c <= "ヶ" else c for c in kana)
