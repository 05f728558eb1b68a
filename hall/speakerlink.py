"""A channel's speaker link: the key that admits a device as one of the channel's speakers.

Only admitted speakers (and the operator) get the audio schedule and the clips, whose next
card is fetched ahead: card secrecy (README "Who sees what, and when"). The key is one per
channel, made at the first start and kept across restarts (`journal_dir/<channel>/speaker.key`,
readable by this user only) so that the classroom's Chromebook keeps its link; the console
shows it as a link and a QR code, and a new key (the old link stops working, the speakers
holding it are disconnected) is one request."""

from __future__ import annotations

import logging
import os
import secrets
from pathlib import Path

from hall.auth import Auth

log = logging.getLogger("yomite.speakers")


class SpeakerLink:
    def __init__(self, channel: str, path: Path | None, auth: Auth) -> None:
        self.channel = channel
        self.path = path
        self.auth = auth
        self.key = self._load() or self._new()
        auth.set_speaker_key(channel, self.key)

    def _load(self) -> str | None:
        if self.path is None:
            return None
        try:
            key = self.path.read_text("utf-8").strip()
        except OSError:
            return None
        return key if len(key) >= 32 else None

    def _new(self) -> str:
        key = self.new_key()
        try:
            self._keep(key)
        except OSError as e:
            log.warning("channel %s: cannot keep the speaker key (%s): the speaker link "
                        "changes at the next start", self.channel, e)
        return key

    def _keep(self, key: str) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.touch(0o600)
        tmp.write_text(key, "utf-8")
        os.replace(tmp, self.path)

    @staticmethod
    def new_key() -> str:
        return secrets.token_urlsafe(24)

    def rotate(self) -> str:
        """A new key (OSError if it cannot be kept: then nothing changed)."""
        return self.adopt(self.new_key())

    def adopt(self, key: str) -> str:
        """This key from now on (OSError if it cannot be kept: then nothing changed)."""
        self._keep(key)
        self.key = key
        self.auth.set_speaker_key(self.channel, key)
        return key

    def url(self, base: str) -> str:
        # the key travels in the fragment: never sent to a server, never in a Referer
        return f"{base}/speaker/{self.channel}#key={self.key}"
