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
    out: dict[int, int] = {}
    for i, n in enumerate(cards):
        shared = 0
        if i > 0:
            shared = _common(keys[i], keys[i - 1])
        if i + 1 < len(cards):
            shared = max(shared, _common(keys[i], keys[i + 1]))
        out[n] = min(shared + 1, len(keys[i]))
    return out


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
    and each card still on the mats now and before the last card read was taken."""
    mats = set(deck)
    order = list(read_in_order)
    hundred = kimariji_lengths(range(1, 101))
    read: list[ReadCard] = []
    previous: dict[int, int] = kimariji_lengths(mats)
    lengths = previous
    for i, no in enumerate(order):
        lengths = kimariji_lengths(mats)
        if no in mats:
            read.append(ReadCard(i + 1, no, written(no)[: lengths[no]],
                                 written(no)[: hundred[no]]))
            mats.discard(no)
        previous = lengths
    now = kimariji_lengths(mats)
    before = previous if order else now
    left = tuple(LeftCard(n, written(n)[: now[n]], written(n)[: before.get(n, now[n])])
                 for n in sorted(mats))
    return Teaching(tuple(read), left)
