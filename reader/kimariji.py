"""Kimariji (決まり字) relative to the cards still on the mats.

A card's kimariji is the shortest start of its upper verse, as it is heard, that no other card
still in play begins with: once the reader has said that much, the card is known. For the
hundred poems these are the familiar ones (むすめふさほせ are one sound); with a colour deck of
20 on the mats they are shorter, and they shrink as cards are read and taken.

"As it is heard" is the pronunciation (`kami_yomi`): を sounds as お, and a long o (おう, こう,
...) as おお, so をぐらやま needs two sounds against おく..., and あふ (おう) three against
おほえ / おほけ (おお). With that rule this module gives the data set's own hundred-card
kimariji for all 100 poems. Shown, a kimariji is the same number of kana of the upper verse as
written (`kami_kana`): the two spellings line up kana for kana over every kimariji.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

from .poems import poem

_O_ROW = frozenset("おこそとのほもよろをごぞどぼぽょ")


@cache
def sound_key(no: int) -> str:
    """Poem `no`'s upper verse as it is heard, one character per kana of `kami_kana`."""
    y = poem(no).kami_yomi.replace(" ", "")
    out = []
    for i, ch in enumerate(y):
        if ch == "を":
            ch = "お"
        elif ch == "う" and i > 0 and y[i - 1] in _O_ROW:
            ch = "お"  # a long o: こう sounds as こお
        out.append(ch)
    return "".join(out)


@cache
def written(no: int) -> str:
    """The upper verse as written in kana, without the phrase spaces."""
    return poem(no).kami_kana.replace(" ", "")


def _common(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def kimariji_lengths(on_mats: Iterable[int]) -> dict[int, int]:
    """For each card on the mats, how many kana of its upper verse decide it.

    One pass over the cards sorted by sound: a card's longest shared start is with one of its
    two neighbours in that order, so each length is 1 + the longer of the two."""
    cards = sorted(set(on_mats), key=sound_key)
    keys = [sound_key(n) for n in cards]
    return {n: _length(keys, i) for i, n in enumerate(cards)}


def kimariji(no: int, on_mats: Iterable[int]) -> str:
    """Poem `no`'s kimariji among `on_mats` (which must hold it), in kana as written."""
    mats = set(on_mats)
    if no not in mats:
        raise ValueError(f"poem {no} is not among the cards on the mats")
    return written(no)[: kimariji_lengths(mats)[no]]


@dataclass(frozen=True, slots=True)
class ReadCard:
    """A card read: its kimariji when it was read (against the cards then on the mats,
    itself included) and for the hundred poems."""

    n: int
    poem: int
    kimariji: str
    hundred: str


@dataclass(frozen=True, slots=True)
class LeftCard:
    """A card still on the mats: its kimariji now, and before the last card was taken."""

    poem: int
    kimariji: str
    before: str


@dataclass(frozen=True, slots=True)
class Teaching:
    read: tuple[ReadCard, ...]
    left: tuple[LeftCard, ...]


def teaching(deck: Iterable[int], read_in_order: Iterable[int]) -> Teaching:
    """The kimariji of a match: each card read (in order) against the mats it was read from,
    and each card still on the mats now and before the last card read was taken.

    The mats are kept sorted by sound as cards leave them: a card read needs only its two
    neighbours there, not the whole mats sorted again (a hundred-card match, republished at
    every card, spent 12 ms at its 60th)."""
    mats = sorted(set(deck), key=sound_key)
    keys = [sound_key(n) for n in mats]
    where = set(mats)
    hundred = _hundred()
    read: list[ReadCard] = []
    last_taken: int | None = None
    for i, no in enumerate(read_in_order):
        last_taken = None
        if no in where:
            at = mats.index(no)
            read.append(ReadCard(i + 1, no, written(no)[: _length(keys, at)],
                                 written(no)[: hundred[no]]))
            del mats[at], keys[at]
            where.discard(no)
            last_taken = no
    now = kimariji_lengths(where)
    before = now if last_taken is None else kimariji_lengths(where | {last_taken})
    left = tuple(LeftCard(n, written(n)[: now[n]], written(n)[: before[n]])
                 for n in sorted(where))
    return Teaching(tuple(read), left)


def _length(keys: list[str], at: int) -> int:
    """How many kana decide the card at `at` among `keys` (sorted): 1 + its longest shared start
    with a neighbour."""
    shared = 0
    if at > 0:
        shared = _common(keys[at], keys[at - 1])
    if at + 1 < len(keys):
        shared = max(shared, _common(keys[at], keys[at + 1]))
    return min(shared + 1, len(keys[at]))


@cache
def _hundred() -> dict[int, int]:
    return kimariji_lengths(range(1, 101))
