"""Where an accent phrase may begin in a verse of the hundred: at a classical word.

Open JTalk's dictionary is modern. A classical word it does not know it cuts into pieces (逢は
into 逢|は, 絶えなむ into 絶|え|なむ, 民 misread and cut た|み) and starts an accent phrase on a
piece, often on a lone ン (しのばれ|ん): a wrong melody every time the verse is read.
`reader/data/words.txt` holds the poems' words as classical grammar cuts them, in each phrase's
spoken reading: "|" before a content word (noun, verb, adjective, adverb, interjection), "+"
before a function word (particle, auxiliary verb, suffix). It was made by listing every word the
dictionary found in the 200 verses and checking each against classical grammar by hand; its
test checks it spells every verse's yomi exactly.

`keep_to_words` takes a phrase's words as the front end analysed them and lets an accent phrase
begin only at the phrase's first mora or at a content word's first mora; any other start joins
the accent phrase before it (which keeps its nucleus). A phrase not in the table (a call, the
jokā, another text) is left as the dictionary read it.
"""

import functools
import re
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any, Final

from audio.voices.kana import morae

CONTENT: Final = "|"
FUNCTION: Final = "+"


@functools.cache
def verses() -> Mapping[str, tuple[str, ...]]:
    """Each verse's key ("012s") → its marked phrases, as the table holds them."""
    text = resources.files("reader").joinpath("data/words.txt").read_text("utf-8")
    return {line.split()[0]: tuple(line.split()[1:]) for line in text.splitlines()
            if line.strip() and not line.startswith("#")}


@functools.cache
def table() -> Mapping[str, str]:
    """Each phrase's yomi (as in poems.json) → the phrase with its words marked."""
    out: dict[str, str] = {}
    for marked_phrases in verses().values():
        for marked in marked_phrases:
            out.setdefault(re.sub(r"[|+]", "", marked), marked)
    return out


def word_starts(marked: str) -> tuple[frozenset[int], frozenset[int]]:
    """The mora indexes where a content word and where a function word starts in a marked
    phrase (the phrase's first mora counts as a content word's)."""
    content, function = {0}, set()
    at = 0
    for mark, piece in re.findall(r"([|+]?)([^|+]+)", marked):
        if mark == CONTENT:
            content.add(at)
        elif mark == FUNCTION:
            function.add(at)
        at += len(morae(piece))
    return frozenset(content), frozenset(function)


def content_starts(yomi: str) -> frozenset[int] | None:
    """Where a content word starts in the phrase said `yomi`, or None if it is not a phrase of
    the hundred poems."""
    marked = table().get(yomi)
    return None if marked is None else word_starts(marked)[0]


def keep_to_words(features: Sequence[dict[str, Any]], yomi: str) -> int:
    """Join to the accent phrase before it every word of the phrase `yomi` that starts an
    accent phrase anywhere but at a content word (features as `pronunciation._align` gives
    them, their `pron` the reference's morae). Returns how many starts it removed."""
    starts = content_starts(yomi)
    if starts is None:
        return 0
    removed, at = 0, 0
    for i, f in enumerate(features):
        if i and f["chain_flag"] != 1 and at not in starts:
            f["chain_flag"] = 1
            removed += 1
        at += len(morae(f["pron"]))
    return removed
