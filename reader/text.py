"""What a text may contain where it enters yomite: a name on a phone, a call's text, a yomi.

Every text from outside (config.yaml, a match's overrides, a referee's name, an abort reason) is
checked here, once, where it enters, so that nothing later (a voice, a log line, a page) meets
a text it cannot handle:

- `clean_text`: normalised to NFKC (full-width digits and letters become ordinary ones, so
  "ｍａｔ３" and "mat3" are one name) and refused if it holds a control or format character
  (Unicode categories Cc and Cf: newlines, NUL, ANSI escapes, bidi overrides, zero-width
  joiners), a line or paragraph separator, a surrogate or a private-use character: those can
  forge a log line or turn a name around on a screen.
- `check_yomi`: what a voice says must be kana, written as it is pronounced, in phrases
  separated by spaces, with a bounded length: the voices misread kanji and latin letters, and
  a phrase longer than any verse's renders as noise or not at all.
"""

import re
import unicodedata
from typing import Final

# Characters no text may hold: Cc (C0/C1 controls, including newline, CR, NUL and ESC), Cf
# (format: bidi overrides and isolates, zero-width spaces and joiners, the BOM), Zl and Zp
# (line and paragraph separators), Cs (lone surrogates), Co (private use) and Cn (unassigned).
REFUSED_CATEGORIES: Final = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})

# Kana (both scripts, with ー and the iteration marks), spaces between phrases, and the few
# punctuation marks the voices treat as pauses (the same set the voices accept).
KANA: Final = "\u3041-\u309f\u30a0-\u30ff"
_SPEAKABLE: Final = re.compile(rf"[{KANA}\s、。！？!?]*")
_KANA_CHAR: Final = re.compile(rf"[{KANA}]")

# The longest phrase of the hundred poems has 8 kana and the longest verse 21 characters; a
# call is a few words. These bounds leave room for any real call and refuse what no voice
# can read as speech.
YOMI_MAX_CHARS: Final = 60
PHRASE_MAX_CHARS: Final = 24


def refused_chars(text: str) -> list[str]:
    """The characters of `text` no text may hold, each once, in order."""
    return list(dict.fromkeys(ch for ch in text if unicodedata.category(ch) in REFUSED_CATEGORIES))


def describe_chars(chars: list[str]) -> str:
    return ", ".join(f"U+{ord(c):04X} ({unicodedata.name(c, 'unnamed')})" for c in chars[:5])


def clean_text(text: str, what: str = "the text") -> str:
    """`text` in NFKC with outer spaces stripped; ValueError naming what is refused."""
    out = unicodedata.normalize("NFKC", text).strip()
    bad = refused_chars(out)
    if bad:
        raise ValueError(
            f"{what} holds control or format characters ({describe_chars(bad)}): "
            "write it on one line with visible characters only"
        )
    return out


def check_yomi(yomi: str) -> str:
    """A yomi a voice can say: kana phrases separated by spaces, bounded; ValueError if not."""
    clean = clean_text(yomi, "the yomi")
    if not _KANA_CHAR.search(clean):
        raise ValueError("a yomi must hold kana: write what the voice says, as it is pronounced")
    if not _SPEAKABLE.fullmatch(clean):
        odd = "".join(dict.fromkeys(ch for ch in clean if not _SPEAKABLE.fullmatch(ch)))
        raise ValueError(
            f"the yomi has {odd!r}: write it in kana as it is pronounced (the text field "
            "can keep the kanji)"
        )
    if len(clean) > YOMI_MAX_CHARS:
        raise ValueError(f"the yomi has {len(clean)} characters; at most {YOMI_MAX_CHARS}")
    longest = max(clean.split(), key=len)
    if len(longest) > PHRASE_MAX_CHARS:
        raise ValueError(
            f"the phrase {longest[:12]!r}… has {len(longest)} kana; at most {PHRASE_MAX_CHARS} "
            "a phrase: put spaces between the phrases"
        )
    return clean
