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


class SpeedNotOffered(ConfigError):
    """A voice speed asked of a match or a preview that the console does not offer (each new
    speed renders every clip again, into the cache): the speeds allowed travel with the error,
    so that a page can say them in its own language."""

    def __init__(self, speed: float, low: float, high: float, step: float,
                 configured: float) -> None:
        self.speed, self.low, self.high, self.step = speed, low, high, step
        self.configured = configured
        super().__init__(f"overrides: voice.speed: {speed:g} is not a speed the console offers: "
                         f"{low:g} to {high:g} in steps of {step:g} (or the configured "
                         f"{configured:g})")


class JournalError(ReaderError):
    """A journal that cannot be read or replayed."""
