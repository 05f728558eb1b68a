"""The referees of every process, known to every process: a referee who joined through one
process (its PIN) keeps its token when its phone reconnects to another.

A join or removal here is put in the shared bucket (`referee.<id>`: the row hall.auth keeps,
with the token's digest, never the token); every process watches those keys and applies what
another process put (hall.auth.Auth.apply_row). A row is sealed with the cluster's key
(cluster.shared.sealed): a row that does not open (put by someone without the key: a referee
with a token of their own choosing) is never applied.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from cluster.bus import Bus, stop_watch
from cluster.seal import SealError
from cluster.shared import opened, sealed
from hall.auth import Auth

log = logging.getLogger("yomite.cluster")


class RefereeShare:
    def __init__(self, bus: Bus, auth: Auth) -> None:
        self.bus = bus
        self.auth = auth
        self._watcher: Any = None
        self._task: asyncio.Task[None] | None = None
        self._puts: set[asyncio.Task[Any]] = set()

    async def start(self) -> None:
        self.auth.on_change = self._changed
        await self._watch()
        self.bus.on_reconnect.append(self._watch)

    async def stop(self) -> None:
        self.auth.on_change = None
        await self._unwatch()

    async def _unwatch(self) -> None:
        task, watcher, self._task, self._watcher = self._task, self._watcher, None, None
        await stop_watch(task, watcher)

    async def _watch(self) -> None:
        await self._unwatch()
        self._watcher = await self.bus.shared.watch("referee.*")
        self._task = asyncio.get_running_loop().create_task(self._run(self._watcher),
                                                            name="cluster-referees")

    async def _run(self, watcher: Any) -> None:
        async for entry in watcher:
            if entry is None:  # the keys there were at the start have all come
                continue
            rid = entry.key.removeprefix("referee.")
            if entry.operation in ("DEL", "PURGE") or not entry.value:
                self.auth.apply_row({"op": "remove", "id": rid})
                continue
            try:
                row = json.loads(opened(self.bus, entry.key, entry.value))
            except SealError as e:
                log.error("referee %s: not applied: %s", rid, e)
                continue
            except ValueError:
                continue
            if isinstance(row, dict) and row.get("id") == rid:
                self.auth.apply_row(row)

    def _changed(self, row: dict[str, object]) -> None:
        task = asyncio.get_running_loop().create_task(self._put(row))
        self._puts.add(task)
        task.add_done_callback(self._puts.discard)

    async def _put(self, row: dict[str, object]) -> None:
        key = f"referee.{row['id']}"
        try:
            if row.get("op") == "remove":
                await self.bus.shared.delete(key)
            else:
                raw = json.dumps(row, ensure_ascii=False).encode()
                await self.bus.shared.put(key, sealed(self.bus, key, raw))
        except Exception as e:  # the broker away: this process knows it; others do not yet
            log.warning("referee %s: not shared with the cluster: %s", row.get("id"), e)
