"""The jokā poems a recorded voice pack may read instead of the configured jokā (`match.prelude`):
a pack that reads its own jokā shows that poem's text while it plays (hall.matchplan).

難波津 is not one of the hundred: it is the poem the Kokinshū's kana preface quotes first (the
"father of poems"), and the jokā of most reading apps and competitive readers. Its text and
reading here are as Shuffle100 reads it; the kana is the historical spelling (なにはづに), the
yomi what is said (なにわづに, いまわはるべと).
"""

from dataclasses import dataclass
from typing import Final

from .config import Spoken


@dataclass(frozen=True, slots=True)
class JokaPoem:
    key: str
    kami: Spoken  # the text shown and the yomi said
    shimo: Spoken
    kami_kana: str  # historical kana
    shimo_kana: str


NANIWAZU: Final = JokaPoem(
    key="naniwazu",
    kami=Spoken(text="難波津に 咲くやこの花 冬ごもり", yomi="なにわづに さくやこのはな ふゆごもり"),
    shimo=Spoken(text="今は春べと 咲くやこの花", yomi="いまわはるべと さくやこのはな"),
    kami_kana="なにはづに さくやこのはな ふゆごもり",
    shimo_kana="いまははるべと さくやこのはな",
)

JOKA_POEMS: Final[dict[str, JokaPoem]] = {NANIWAZU.key: NANIWAZU}
