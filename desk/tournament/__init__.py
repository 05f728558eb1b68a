"""The desk's steps on a tournament, pure: each checks that it may happen (or raises a
DeskError saying why not and what to do) and returns the Change it makes. `apply` makes the
change on the frozen Tournament; the repository makes the same change in the database, in one
transaction. The time of a step is given to it (`at`): nothing here reads a clock.

Callers use the package as one namespace (`from desk import tournament as ops`); the steps live
by what they act on: players, draw (blocks), rounds, results, referees; changes holds the
closed union of changes and `apply`.
"""

from ..mats import MAX_MAT, block_mats, free_mats
from .changes import (
    BlockChanged,
    BlocksDrawn,
    Change,
    PlayerChanged,
    PlayersAdded,
    PublicLinkChanged,
    ReadingChanged,
    RefereeChanged,
    ResultRecorded,
    RoundConfirmed,
    RoundPaired,
    RoundRemoved,
    SettingsChanged,
    apply,
)
from .draw import change_block, draw_blocks
from .players import add_players, change_settings, edit_player, public_link, withdraw
from .referees import assign_referee, mats_of
from .results import confirm_by_players, confirm_round, record_result, walkover
from .rounds import (
    STALE,
    confirm_reading,
    extra_card,
    locate,
    mix,
    pair_again,
    pair_final,
    pair_next,
    start_reading,
    unpair,
)

__all__ = [
    "MAX_MAT", "STALE", "BlockChanged", "BlocksDrawn", "Change", "PlayerChanged",
    "PlayersAdded", "PublicLinkChanged", "ReadingChanged", "RefereeChanged", "ResultRecorded",
    "RoundConfirmed", "RoundPaired", "RoundRemoved", "SettingsChanged", "add_players", "apply",
    "assign_referee", "block_mats", "change_block", "change_settings", "confirm_by_players",
    "confirm_reading", "confirm_round", "draw_blocks", "edit_player", "extra_card", "free_mats",
    "locate", "mats_of", "mix", "pair_again", "pair_final", "pair_next", "public_link",
    "record_result", "start_reading", "unpair", "walkover", "withdraw",
]
