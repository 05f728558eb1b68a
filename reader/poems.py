"""The hundred poems, loaded from the package's copy of the verified data set."""

import json
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from importlib import resources


class Color(StrEnum):
    BLUE = "blue"
    PINK = "pink"
    YELLOW = "yellow"
    GREEN = "green"
    ORANGE = "orange"


@dataclass(frozen=True, slots=True)
class Poem:
    no: int
    author: str
    kami: str
    shimo: str
    kami_kana: str
    shimo_kana: str
    kami_yomi: str
    shimo_yomi: str
    kimariji: str
    color: Color


@cache
def all_poems() -> tuple[Poem, ...]:
    """The 100 poems in Ogura order (index i holds poem i + 1)."""
    raw = json.loads(resources.files("reader").joinpath("data/poems.json").read_text("utf-8"))
    poems = tuple(
        Poem(
            no=int(p["no"]),
            author=p["author"],
            kami=p["kami"],
            shimo=p["shimo"],
            kami_kana=p["kami_kana"],
            shimo_kana=p["shimo_kana"],
            kami_yomi=p["kami_yomi"],
            shimo_yomi=p["shimo_yomi"],
            kimariji=p["kimariji"],
            color=Color(p["color"]),
        )
        for p in raw
    )
    if [p.no for p in poems] != list(range(1, 101)):
        raise ValueError("reader/data/poems.json must hold poems 1..100 in order")
    return poems


def poem(no: int) -> Poem:
    if not 1 <= no <= 100:
        raise KeyError(f"poem number must be 1..100, not {no}")
    return all_poems()[no - 1]
