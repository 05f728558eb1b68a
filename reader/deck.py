"""Decks: which poems a match draws from, and the seeded order they are read in."""

import hashlib
import hmac
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .errors import BadDeck
from .poems import Color, all_poems

COLOR_ALIASES: dict[str, Color] = {
    **{c.value: c for c in Color},
    "青": Color.BLUE,
    "桃": Color.PINK,
    "赤": Color.PINK,
    "red": Color.PINK,
    "黄": Color.YELLOW,
    "緑": Color.GREEN,
    "橙": Color.ORANGE,
}

SEED_MAX = 2**53 - 1  # JSON-safe integers


def parse_color(name: str) -> Color:
    try:
        return COLOR_ALIASES[name.strip().lower()]
    except KeyError:
        allowed = ", ".join(COLOR_ALIASES)
        raise BadDeck(f"unknown colour {name!r}; use one of: {allowed}") from None


def new_seed() -> int:
    """A fresh random seed, short enough to read out to another class (6 digits). A server
    keys it (`keyed_seed`), so that the order cannot be searched for among a million seeds."""
    return secrets.randbelow(1_000_000)


def keyed_seed(key: bytes, seed: int) -> int:
    """The seed the order is shuffled with on a server holding `key`: HMAC-SHA256 of the seed
    under the server's secret. A seed shown or typed (to replay an order on the same server)
    then says nothing of the order to anyone without the key, and no one can try seeds
    against the cards read so far."""
    mac = hmac.new(key, f"yomite-deck:{seed}".encode("ascii"), hashlib.sha256).digest()
    return int.from_bytes(mac[:8], "big")


def _splitmix64(state: int) -> tuple[int, int]:
    state = (state + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return state, z ^ (z >> 31)


def shuffled(items: Sequence[int], seed: int) -> tuple[int, ...]:
    """Fisher-Yates with splitmix64: the same seed gives the same order on every Python
    version and platform (random.Random's algorithms are not a documented contract)."""
    out = list(items)
    state = seed & 0xFFFFFFFFFFFFFFFF
    for i in range(len(out) - 1, 0, -1):
        state, r = _splitmix64(state)
        j = r % (i + 1)
        out[i], out[j] = out[j], out[i]
    return tuple(out)


@dataclass(frozen=True, slots=True)
class Deck:
    """The poems of a match (in Ogura order), the seed, and the reading order it gives."""

    poems: tuple[int, ...]
    colors: tuple[Color, ...]
    seed: int
    order: tuple[int, ...]

    @classmethod
    def build(
        cls,
        *,
        colors: Iterable[str] = (),
        poems: Iterable[int] = (),
        seed: int | None = None,
        key: bytes | None = None,
    ) -> "Deck":
        """`key`: the server's deck key (see `keyed_seed`); without one the order is the
        seed's own, as the command line's `render --seed` and `dry-run --seed` give it."""
        cols = tuple(dict.fromkeys(parse_color(c) for c in colors))
        nos = list(dict.fromkeys(poems))
        for n in nos:
            if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= 100:
                raise BadDeck(f"poem numbers must be integers 1..100, not {n!r}")
        if cols:
            nos += [p.no for p in all_poems() if p.color in cols and p.no not in nos]
        if not nos:
            raise BadDeck("a deck needs at least one colour or poem number")
        if seed is None:
            seed = new_seed()
        if not 0 <= seed <= SEED_MAX:
            raise BadDeck(f"seed must be an integer 0..{SEED_MAX}, not {seed}")
        base = tuple(sorted(nos))
        order = shuffled(base, seed if key is None else keyed_seed(key, seed))
        return cls(poems=base, colors=cols, seed=seed, order=order)
