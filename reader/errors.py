"""The reader layer's one error hierarchy. The API maps these to HTTP status codes."""


class ReaderError(Exception):
    """Base of every error the domain raises; the message says what to do."""


class IllegalMove(ReaderError):
    """A command that the current phase does not allow (HTTP 409)."""

    def __init__(self, move: str, phase: str, why: str = "") -> None:
        self.move = move
        self.phase = phase
        text = f"cannot {move} while {phase}"
        super().__init__(f"{text}: {why}" if why else text)


class BadDeck(ReaderError):
    """An unknown colour, poem number or an impossible card count (HTTP 422)."""


class TooManyCards(BadDeck):
    """More cards asked for than the match's deck holds: the figures travel with the error, so
    that a page can say them in its own language."""

    def __init__(self, cards: int, poems: int) -> None:
        self.cards, self.poems = cards, poems
        super().__init__(f"cards is {cards} but the deck holds {poems} poems; "
                         f"choose 1..{poems} cards or a larger deck")


class ConfigError(ReaderError):
    """config.yaml (or an override) has a bad key or value; the message names the key."""


class JournalError(ReaderError):
    """A journal that cannot be read or replayed."""
