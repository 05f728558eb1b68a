"""The tournament desk's settings (`desk` in config.yaml; hall/config.py assembles the file)."""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class DeskConfig(BaseModel):
    """The tournament desk (desk/, /desk): its database and its limits."""

    # like every section: an unknown key is an error that names it, and nothing changes later
    model_config = ConfigDict(extra="forbid", frozen=True)

    # An SQLAlchemy URL. The default is an SQLite file under var/ (relative to the directory
    # the server runs in); e.g. postgresql+psycopg://user:pw@host/yomite for a server of one's
    # own (with its driver installed).
    # A password is best kept out of this file: libpq's own password file
    # (…?sslmode=verify-full&sslrootcert=/etc/yomite/pg-ca.crt&passfile=/etc/yomite/pgpass).
    database_url: str = Field("sqlite:///var/desk.sqlite3", min_length=1, max_length=500,
                              pattern=r"^[A-Za-z][A-Za-z0-9+_.-]*://")
    # How long a desk step waits on the database before it answers 503 "nothing was recorded"
    # (a server that does not answer: hung, or cut off by the network).
    database_timeout_s: float = Field(2.5, ge=0.5, le=60)
    rounds: int = Field(6, ge=1, le=20)  # preliminary rounds of a new tournament
    max_upload_kb: int = Field(1024, ge=1, le=65536)  # a CSV or JSON file sent to the desk
    long_poll_s: float = Field(25.0, ge=1, le=120)  # a live page's wait for the next change
    # Rule 2: in round 1 and the final the players shuffle, split the cards, play janken and
    # choose after the bow. In these rounds the desk's start reads 「礼」 alone and the reader
    # waits; 「札を覚えてください」 follows when the desk (or the console) says the mats are
    # ready. "every_round": wait in every round; "never": 礼, then at once the memorisation.
    ready_after_bow: Literal["first_and_final", "every_round", "never"] = "first_and_final"
    # A player absent from a match (不戦勝): the opponent's cards, the absent player's 0 (a
    # regional rule: "an absent player's opponent wins 9-0"; at most the cards read).
    walkover_cards: int = Field(9, ge=0, le=100)
