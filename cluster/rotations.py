"""A channel's PIN or speaker key changed at a console, on every process of a cluster.

At start every process takes them from the shared bucket (cluster.shared: `pin.<channel>`,
`speaker-key.<channel>`). A new one made later through any process is put there, and every
process watches those keys and adopts a value that differs from its own: the old PIN stops
counting and the speakers that joined with the old link are disconnected everywhere, as on one
process. The values are sealed with the cluster's key (cluster.shared.sealed): one that does not
open (put by someone without the key) is never adopted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from cluster.bus import Bus
from cluster.seal import SealError
from cluster.shared import opened, sealed
from hall.hall import Hall

log = logging.getLogger("yomite.cluster")

KINDS = ("pin", "speaker-key")


class RotationShare:
    def __init__(self, bus: Bus, hall: Hall) -> None:
        self.bus = bus
        self.hall = hall
        self._watchers: list[Any] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._puts: set[asyncio.Task[Any]] = set()

    async def start(self) -> None:
        for name in self.hall.channels:
            self.hook(name)
        await self._watch()
        self.bus.on_reconnect.append(self._watch)

    def hook(self, name: str) -> None:
        """The channel's new PIN or speaker key is shared (a room's too, when it is made)."""
        self.hall.channels[name].on_secret = (
            lambda kind, value, name=name: self._changed(name, kind, value))

    async def stop(self) -> None:
        for svc in self.hall.channels.values():
            svc.on_secret = None
        await self._unwatch()

    async def _unwatch(self) -> None:
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for w in self._watchers:
            with contextlib.suppress(Exception):
                await w.stop()
        self._tasks, self._watchers = [], []

    async def _watch(self) -> None:
        await self._unwatch()
        loop = asyncio.get_running_loop()
        for kind in KINDS:
            w = await self.bus.shared.watch(f"{kind}.*")
            self._watchers.append(w)
            self._tasks.append(loop.create_task(self._run(kind, w), name=f"cluster-{kind}"))

    async def _run(self, kind: str, watcher: Any) -> None:
        async for entry in watcher:
            if entry is None or not entry.value or entry.operation in ("DEL", "PURGE"):
                continue
            channel = entry.key.removeprefix(f"{kind}.")
            try:
                value = opened(self.bus, entry.key, entry.value)
            except SealError as e:
                log.error("channel %s: the %s put on the broker is not adopted: %s", channel,
                          kind, e)
                continue
            self.adopt(kind, channel, value.decode("utf-8", errors="replace"))

    def adopt(self, kind: str, channel: str, value: str) -> None:
        """A value put by a process (this one's own come back equal: nothing happens)."""
        svc = self.hall.channels.get(channel)
        if svc is None or not value:
            return
        try:
            if kind == "pin" and value != svc.pin:
                svc.adopt_pin(value)
                log.info("channel %s: the PIN changed through another process", channel)
            elif (kind == "speaker-key" and svc.speaker_link is not None
                  and value != svc.speaker_link.key):
                svc.adopt_speaker_key(value)
                log.info("channel %s: the speaker link changed through another process",
                         channel)
        except OSError as e:  # the journal folder: the value holds in memory until a restart
            log.warning("channel %s: the new %s cannot be kept here: %s", channel, kind, e)

    def _changed(self, channel: str, kind: str, value: str) -> None:
        task = asyncio.get_running_loop().create_task(self._put(channel, kind, value))
        self._puts.add(task)
        task.add_done_callback(self._puts.discard)

    async def _put(self, channel: str, kind: str, value: str) -> None:
        try:
            key = f"{kind}.{channel}"
            await self.bus.shared.put(key, sealed(self.bus, key, value.encode("utf-8")))
        except Exception as e:  # the broker away: this process has it; others not yet
            log.warning("channel %s: the new %s is not shared with the cluster: %s",
                        channel, kind, e)
