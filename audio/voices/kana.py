"""Kana as morae: katakana, a phrase's morae, a mora's vowel."""

from typing import Final

_HIRAGANA_TO_KATAKANA: Final = {c: c + 0x60 for c in range(0x3041, 0x3097)}
_SMALL: Final = frozenset("ャュョァィゥェォヮ")
DEVOICED: Final = "’"
LONG: Final = "ー"
_VOWEL: Final = {
    **dict.fromkeys("アカサタナハマヤラワガザダバパァャヮ", "a"),
    **dict.fromkeys("イキシチニヒミリギジヂビピィ", "i"),
    **dict.fromkeys("ウクスツヌフムユルグズヅブプゥュヴ", "u"),
    **dict.fromkeys("エケセテネヘメレゲゼデベペェ", "e"),
    **dict.fromkeys("オコソトノホモヨロヲゴゾドボポォョ", "o"),
}


def katakana(kana: str) -> str:
    return kana.translate(_HIRAGANA_TO_KATAKANA)


def morae(kana: str) -> list[str]:
    """Katakana (or hiragana) split into morae: small ゃゅょぁぃぅぇぉ join the kana before;
    ン, ッ and ー are morae of their own; devoicing marks and anything not kana are dropped."""
    out: list[str] = []
    for ch in katakana(kana):
        if ch in _SMALL and out:
            out[-1] += ch
        elif ch == LONG or ch in _VOWEL or ch in "ンッ":
            out.append(ch)
    return out


def vowel(mora: str) -> str | None:
    return _VOWEL.get(mora[-1]) if mora else None
