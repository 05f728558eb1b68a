"""The secrets a cluster keeps on its broker, sealed with a key the broker never sees.

A cluster's processes agree through the broker on what must be the same everywhere: the deck's
and the speakers' keys, the operator's token, each channel's PIN and speaker key, the referees
(cluster.shared, cluster.rotations, cluster.referees), the organisations' invite codes and
operators (cluster.records), and every journal line, whose header names the whole order of the
cards (cluster.journalstream, cluster.mirror). Each of these is sealed with AES-256-GCM under
the cluster's own key, read by each process from a file the operator places on it
(`cluster.secret_key_file`), so that the broker's administrator, a stolen copy of its store, or
a client that got onto the bus reads none of it, and can write no value a process would take:
a sealed value opens only with the key, only unaltered, and only under the name it was sealed
for (the associated data is the bucket and key, or the journal's subject: a PIN's sealed bytes
put under another channel's key do not open).

A sealed value: `MAGIC` (a NUL byte first: no JSON, PIN, hex key or token begins with one),
the key's id (8 bytes: a hash of the key, so a process can say "sealed with another key" rather
than "altered"), a random 96-bit nonce, the ciphertext and its 16-byte tag. The key file holds
one key a line (64 hex digits; `#` comments): the first seals, every one opens, so a key can be
rotated later by putting the new one first and keeping the old one below it while values are
written anew.

A value that does not open is an error that names the key file (`SealError`), never replaced
by a new one: two processes with different keys must not each make their own PIN.

`Sealer.plain()` is a process without a key (`--bus-insecure` on one machine, where the broker
listens on loopback only): values travel as they are, and a sealed one is refused as such.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import stat
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

MAGIC = b"\x00YS1"  # a sealed value's first bytes (version 1 of the format)
KEY_BYTES = 32
KEY_ID_BYTES = 8
NONCE_BYTES = 12
MAX_KEYS = 8  # lines of a key file: the current key and older ones being rotated out
MAX_KEY_FILE = 4096  # bytes: a key file is a few lines of hex


class SealError(Exception):
    """A value that does not open with this process's key (or a key file that cannot be
    read): the message names the value and the key file."""


def key_id(key: bytes) -> bytes:
    return hashlib.sha256(b"yomite seal key id\x00" + key).digest()[:KEY_ID_BYTES]


def is_sealed(data: bytes) -> bool:
    return data.startswith(MAGIC)


class Sealer:
    """Seals and opens values under the cluster's key(s). `source` names where the keys came
    from (the key file), for the messages."""

    def __init__(self, keys: list[bytes], source: str) -> None:
        if any(len(k) != KEY_BYTES for k in keys):
            raise SealError(f"{source}: a key is {KEY_BYTES} bytes")
        self.source = source
        self._keys = {key_id(k): AESGCM(k) for k in keys}
        self._current = key_id(keys[0]) if keys else None

    @classmethod
    def plain(cls) -> Sealer:
        """No key: values are written as they are (cluster.insecure on one machine)."""
        return cls([], "no cluster.secret_key_file")

    @classmethod
    def load(cls, path: Path) -> Sealer:
        """The keys of a key file (as `write_key_file` makes it). SealError naming the file if
        it cannot be read or holds no key."""
        try:
            if path.stat().st_size > MAX_KEY_FILE:
                raise SealError(f"cluster.secret_key_file {path}: larger than {MAX_KEY_FILE} "
                                "bytes: not a key file")
            text = path.read_text("utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise SealError(f"cluster.secret_key_file {path}: cannot be read ({e}); make one "
                            "with `yomite cluster-key FILE` and copy it to every process") \
                from None
        keys = []
        for n, line in enumerate(text.splitlines(), 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            try:
                key = bytes.fromhex(line)
            except ValueError:
                key = b""
            if len(key) != KEY_BYTES:
                raise SealError(f"cluster.secret_key_file {path}, line {n}: not a key "
                                f"({KEY_BYTES * 2} hex digits)")
            keys.append(key)
        if not keys:
            raise SealError(f"cluster.secret_key_file {path}: no key in it; make one with "
                            "`yomite cluster-key FILE`")
        if len(keys) > MAX_KEYS:
            raise SealError(f"cluster.secret_key_file {path}: {len(keys)} keys (at most "
                            f"{MAX_KEYS})")
        return cls(keys, f"cluster.secret_key_file {path}")

    @property
    def sealing(self) -> bool:
        return self._current is not None

    @property
    def key_id(self) -> str | None:
        """The sealing key's id (hex), which a value sealed with it carries."""
        return self._current.hex() if self._current is not None else None

    def seal(self, where: str, data: bytes) -> bytes:
        """`data` sealed for `where` (a bucket and key, or a subject): it opens under that name
        only. Without a key, `data` itself."""
        if self._current is None:
            return data
        nonce = secrets.token_bytes(NONCE_BYTES)
        box = self._keys[self._current].encrypt(nonce, data, where.encode("utf-8"))
        return MAGIC + self._current + nonce + box

    def open(self, where: str, data: bytes) -> bytes:
        """What `seal(where, ...)` sealed. SealError when it does not open here: sealed with a
        key this process does not have, altered, sealed for another name, or not sealed at
        all while this process seals (written by a process without the key, or by someone
        else); without a key, a sealed value."""
        if not is_sealed(data):
            if self._current is None:
                return data
            raise SealError(f"{where}: not sealed, while this process seals with "
                            f"{self.source}: written by a process without that key, or by "
                            "someone else; not used")
        if self._current is None:
            raise SealError(f"{where}: sealed, and this process has no key: set "
                            "cluster.secret_key_file to the cluster's key file")
        kid = data[len(MAGIC):len(MAGIC) + KEY_ID_BYTES]
        aead = self._keys.get(kid)
        if aead is None:
            raise SealError(f"{where}: sealed with another key (id {kid.hex()}) than those in "
                            f"{self.source} (id {self._current.hex()}): every process of the "
                            "cluster needs the same key file")
        start = len(MAGIC) + KEY_ID_BYTES
        nonce, box = data[start:start + NONCE_BYTES], data[start + NONCE_BYTES:]
        try:
            return aead.decrypt(nonce, box, where.encode("utf-8"))
        except InvalidTag:
            raise SealError(f"{where}: does not open with {self.source}: altered, or sealed "
                            "for another name; not used") from None


def write_key_file(path: Path) -> str:
    """A new key (32 random bytes, hex) in a new file readable by this user only; its id.
    FileExistsError rather than replace a key: values sealed with it would never open again."""
    key = secrets.token_bytes(KEY_BYTES)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write("# yomite's cluster key (cluster.secret_key_file): the same file on every "
                "process;\n# whoever reads it reads the cluster's secrets on the broker\n")
        f.write(key.hex() + "\n")
    return key_id(key).hex()


def loose_permissions(path: Path) -> bool:
    """The key file can be read by others than its owner (POSIX only)."""
    if os.name != "posix":
        return False
    try:
        return bool(path.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO))
    except OSError:
        return False
