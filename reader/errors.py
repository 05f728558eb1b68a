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


class ConfigError(ReaderError):
    """config.yaml (or an override) has a bad key or value; the message names the key."""


class JournalError(ReaderError):
    """A journal that cannot be read or replayed."""
