"""A channel's projector and viewer links: the keys that let a page watch a room.

A room's state is for its class: a page without one of its links is refused (a room's name
is on its projector, and in its referees' QR code). The projector link admits the class's
projector, which is counted apart from the room's viewers (its quota is theirs); the viewer
link is what a teacher hands to anyone else who may watch. Neither shows anything a viewer
could not see: the public state only.

The keys are derived (HMAC-SHA256) from the server's clip key (`journal_dir/speakers.key`,
which a cluster's processes share: cluster.shared) and the channel's name, so every process
knows them, a restart keeps them, and nothing more is kept."""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass
from urllib.parse import quote


def _key(secret: bytes, kind: str, channel: str) -> str:
    mac = hmac.new(secret, f"yomite view link|{kind}|{channel}".encode(), hashlib.sha256)
    return base64.urlsafe_b64encode(mac.digest()[:24]).decode("ascii")


@dataclass(frozen=True, slots=True)
class ViewLinks:
    channel: str
    projector_key: str
    viewer_key: str

    @classmethod
    def derive(cls, secret: bytes, channel: str) -> ViewLinks:
        return cls(channel, _key(secret, "projector", channel), _key(secret, "viewer", channel))

    # the key travels in the fragment: never sent to a server, never in a Referer
    def projector_url(self, base: str) -> str:
        return f"{base}/display/{quote(self.channel)}#key={self.projector_key}"

    def viewer_url(self, base: str) -> str:
        return f"{base}/display/{quote(self.channel)}#key={self.viewer_key}"
