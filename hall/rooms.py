"""Rooms: channels opened while the server runs, each owned by an organisation (hall.orgs).

A teacher opens a room with one tap; it is a channel like config.yaml's (its runtime, journal,
PIN, speaker link) read by the browsers (`output: browser`), named `r-` and 8 random letters or
digits. Its organisation's operators and the admin operate it; to anyone else's operator token
it does not exist (api/deps.py). It closes when told to, when its organisation is removed, or
after `rooms.idle_close_min` with no client and no match being read (`sweep`, driven by the
injected clock); its clients are then disconnected (`room_closed`) and its journals stay, so
its history is still read. Rooms are kept in a `RoomStore`: an open room comes back when the
server starts again, its journal recovered like a config channel's.

Where a room's channel runs is its `ChannelHost`'s business: on one process the hall
(`HallHost`); in a cluster every process has every room, each read by the one process that
holds its lease (cluster.records.ClusterHost), and what one process changes reaches the others
through the shared store (`adopt`). A room in use on any process is not idle: each process
says so in the store (`RoomStore.mark_busy`, renewed every sweep or so) and none closes a room
whose mark it saw change within the idle time, by its own clock (the mark is another process's
wall clock, which this one's need not agree with: it is never compared with it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

from pydantic import ValidationError

from hall.channel import ChannelService
from hall.config import ChannelConfig, Config
from hall.errors import RoomRefused
from hall.hall import Hall
from hall.orgs import ID_ALPHABET, Orgs
from hall.pageseats import PageSeats
from hall.roomstore import Room, RoomStore
from reader.clock import Clock

log = logging.getLogger("yomite.rooms")

CLOSED_REASON = "room_closed"  # a closed room's clients read this close reason


class ChannelHost(Protocol):
    async def add(self, ch: ChannelConfig, *, here: bool) -> None:
        """The room's channel made and started (`here`: opened by this process; in a cluster
        it is read here first). Raises what the hall raises if it cannot start."""
        ...

    async def close(self, name: str, reason: str) -> None:
        """The channel stopped and forgotten, its clients closed with `reason`."""
        ...


class Seats(Protocol):
    """The quotas' seats: on one process the rooms counted here are exact (`Unlimited`: no
    seat to take); in a cluster each open room takes a seat in its organisation's quota and
    the server's, agreed through the broker (cluster.seats)."""

    async def take(self, pool: str, room: str, most: int) -> bool:
        """A seat in `pool` (an organisation's id; "" the server's) for `room`; False when
        `most` rooms hold one. OSError if it cannot be known."""
        ...

    async def give_back(self, pool: str, room: str) -> None:
        """`room`'s seat freed; OSError if that cannot be kept."""
        ...


class Unlimited:
    """One process: the count of the rooms it holds is the quota (Rooms.open checks it)."""

    async def take(self, pool: str, room: str, most: int) -> bool:
        return True

    async def give_back(self, pool: str, room: str) -> None:
        return None


class HallHost:
    """One process: the room's channel runs in its hall."""

    def __init__(self, hall: Hall) -> None:
        self.hall = hall

    async def add(self, ch: ChannelConfig, *, here: bool) -> None:
        self.hall.add_channel(ch)

    async def close(self, name: str, reason: str) -> None:
        with contextlib.suppress(KeyError):
            await self.hall.close_channel(name, reason)


class Rooms:
    def __init__(self, config: Config, hall: Hall, orgs: Orgs, store: RoomStore, clock: Clock,
                 wall: Callable[[], float] = time.time, host: ChannelHost | None = None,
                 shared: bool = False, seats: Seats | None = None) -> None:
        """`shared`: the store is a cluster's (the rooms in use are said there, and each
        process closes a room only when none saw it in use)."""
        self.config = config
        self.limits = config.rooms
        self.hall = hall
        self.orgs = orgs
        self.store = store
        self.clock = clock  # monotonic: idle time
        self.wall = wall  # when a room was opened or closed (shown, kept)
        self._rooms: dict[str, Room] = {}  # open and recently closed, by name
        self._busy_at: dict[str, float] = {}  # an open room: when it was last in use
        self._sweeper: asyncio.Task[None] | None = None
        self.host: ChannelHost = host or HallHost(hall)
        self.shared = shared
        self.seats: Seats = seats or Unlimited()
        # a room's pages: exact on one process; a cluster's agree through the broker
        self.pages = PageSeats(hall)
        self._opening: set[str] = set()  # being opened by this process
        self._marked: dict[str, float] = {}  # when this process last said a room is in use
        # another process's mark of a room in use, and when (self.clock) it was first seen so
        self._marks_seen: dict[str, tuple[float, float]] = {}

    # ------------------------------------------------------------------ start and stop
    async def start(self) -> None:
        """The rooms kept: the open ones started again (their journals recovered), the closed
        ones older than `rooms.closed_kept_days` forgotten (their journals stay on disk)."""
        keep_s = self.limits.closed_kept_days * 86400.0
        for room in self.store.rooms():
            if room.closed is not None and self.wall() - room.closed > keep_s:
                with contextlib.suppress(OSError):
                    await self.store.drop(room.name)
                continue
            if room.closed is None and room.org not in {o.id for o in self.orgs.all()}:
                room = replace(room, closed=self.wall(), closed_why="org_removed")
                with contextlib.suppress(OSError):
                    await self.store.save(room)
            self._rooms[room.name] = room
            if room.closed is None:
                try:
                    await self.host.add(self._channel(room), here=False)
                except Exception as e:  # one room that cannot start keeps no other down
                    log.error("room %s cannot start again (%s): it is closed", room.name, e)
                    self._rooms[room.name] = replace(room, closed=self.wall(),
                                                     closed_why="failed")
                    with contextlib.suppress(OSError):
                        await self.store.save(self._rooms[room.name])
                    continue
                self._busy_at[room.name] = self.clock.now()
        if self.limits.idle_close_min is not None:
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep_forever())

    async def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper

    # ------------------------------------------------------------------ who owns what
    def owner(self, channel: str) -> str | None:
        """The organisation of a room (open or closed); None for config.yaml's channels."""
        room = self._rooms.get(channel)
        return room.org if room is not None else None

    def room(self, name: str, org: str | None) -> Room:
        """A room that `org`'s operator (None: the admin) may see; RoomRefused otherwise,
        the same whether it is another organisation's or none at all."""
        room = self._rooms.get(name)
        if room is None or (org is not None and room.org != org):
            raise RoomRefused("no_such_room", f"there is no room {name[:40]!r}",
                              "GET /api/rooms lists your organisation's rooms")
        return room

    def rooms(self, org: str | None) -> list[Room]:
        """`org`'s rooms (None: every organisation's), open ones first, newest first."""
        mine = [r for r in self._rooms.values() if org is None or r.org == org]
        return sorted(mine, key=lambda r: (r.closed is not None, -r.opened))

    def open_count(self, org: str | None) -> int:
        return sum(1 for r in self.rooms(org) if r.closed is None)

    def max_clients(self, channel: str) -> int | None:
        """How many pages an open room takes (its organisation's quota); None for a config
        channel (bounded by the server's limits only)."""
        room = self._rooms.get(channel)
        if room is None or room.closed is not None:
            return None
        try:
            return self.orgs.get(room.org).max_clients_per_room
        except RoomRefused:
            return self.limits.max_clients_per_room

    # ------------------------------------------------------------------ open and close
    async def open(self, org_id: str, by: str, colors: tuple[str, ...] | None = None) -> Room:
        """A new room of `org_id`, started. RoomRefused when a quota is reached or the colours
        are wrong; OSError if it cannot be kept."""
        org = self.orgs.get(org_id)
        if self.open_count(org.id) >= org.max_open_rooms:
            raise _too_many(org.name, org.max_open_rooms)
        if self.open_count(None) >= self.limits.max_open:
            raise _server_full(self.limits.max_open)
        room = Room(self._new_name(), org.id, self.wall(), by, colors)
        try:
            ch = self._channel(room)
        except ValidationError as e:
            raise RoomRefused("bad_deck", f"colors: {e.errors()[0].get('msg')}",
                              "name colours as blue, pink, yellow, green, orange (or 青 桃 黄 "
                              "緑 橙), or leave them out") from None
        self._opening.add(room.name)
        try:
            await self._take_seats(room, org.name, org.max_open_rooms)
            try:
                await self.store.save(room)
                await self.host.add(ch, here=True)
            except BaseException:
                with contextlib.suppress(OSError):
                    await self.store.drop(room.name)
                await self._give_back_seats(room)
                raise
            self._rooms[room.name] = room
            self._busy_at[room.name] = self.clock.now()
        finally:
            self._opening.discard(room.name)
        log.info("room %s opened for %s by %r", room.name, org.id, by)
        return room

    async def close(self, name: str, why: str) -> Room:
        """Close an open room (a closed one is answered as it is): its clients are
        disconnected with `room_closed`, its runtime stops; it stays listed with its history.
        OSError if the closing cannot be kept (the room stays open)."""
        room = self._rooms[name]
        if room.closed is not None:
            return room
        closed = replace(room, closed=self.wall(), closed_why=why)
        await self.store.save(closed)
        self._rooms[name] = closed
        self._busy_at.pop(name, None)
        self._marked.pop(name, None)
        self._marks_seen.pop(name, None)
        await self.host.close(name, CLOSED_REASON)
        await self._give_back_seats(room)
        log.info("room %s of %s closed (%s)", name, room.org, why)
        return closed

    async def _take_seats(self, room: Room, org_name: str, most: int) -> None:
        """The room's seats in its organisation's quota and the server's (in a cluster the
        counts above are as this process heard last: the seats are exact)."""
        if not await self.seats.take(room.org, room.name, most):
            raise _too_many(org_name, most)
        try:
            full = not await self.seats.take("", room.name, self.limits.max_open)
        except BaseException:
            await self._give_back_seats(room)
            raise
        if full:
            await self._give_back_seats(room)
            raise _server_full(self.limits.max_open)

    async def _give_back_seats(self, room: Room) -> None:
        """Best effort: a seat whose room is closed is free anyway (cluster.seats)."""
        for pool in (room.org, ""):
            try:
                await self.seats.give_back(pool, room.name)
            except OSError as e:
                log.warning("room %s: its seat in %r is given back later (%s)", room.name,
                            pool or "the server", e)

    async def close_org(self, org_id: str) -> None:
        for room in self.rooms(org_id):
            if room.closed is None:
                await self.close(room.name, "org_removed")

    async def adopt(self, name: str, room: Room | None) -> None:
        """A room's record as another process of a cluster wrote it (None: forgotten): a room
        opened there is started here, one closed there is closed here. A record this process
        wrote itself changes nothing."""
        if name in self._opening:
            return
        known = self._rooms.get(name)
        if room is None:
            self._rooms.pop(name, None)
            if known is not None and known.closed is None:
                self._busy_at.pop(name, None)
                await self.host.close(name, CLOSED_REASON)
            return
        if room.closed is None:
            if known is None:
                self._rooms[name] = room
                self._busy_at[name] = self.clock.now()
                try:
                    await self.host.add(self._channel(room), here=False)
                except Exception as e:  # the others read it: this process only cannot
                    log.error("room %s opened elsewhere cannot start here: %s", name, e)
                    self._rooms.pop(name, None)
                    self._busy_at.pop(name, None)
            return
        self._rooms[name] = room
        if known is not None and known.closed is None:
            self._busy_at.pop(name, None)
            self._marked.pop(name, None)
            await self.host.close(name, CLOSED_REASON)
            log.info("room %s of %s closed elsewhere (%s)", name, room.org, room.closed_why)

    # ------------------------------------------------------------------ idle rooms
    def _in_use(self, svc: ChannelService) -> bool:
        """A client connected, or a match being read (a match paused by a hand, or not
        started, or over, waits for no one once everyone has left)."""
        if svc.hub.clients:
            return True
        if svc.runtime is None or svc.runtime.at_rest:
            return False
        m = svc.latest().state.match
        return m is not None and not m.snapshot.paused

    async def sweep(self) -> list[str]:
        """Close the open rooms that have not been in use for `rooms.idle_close_min` by the
        clock; returns their names. The server calls it every minute or so; a test calls it
        after moving its clock."""
        idle = self.limits.idle_close_min
        now, wall = self.clock.now(), self.wall()
        closed = []
        for name in [n for n, r in self._rooms.items() if r.closed is None]:
            svc = self.hall.channels.get(name)
            if svc is not None and self._in_use(svc):
                self._busy_at[name] = now
                await self._say_busy(name, wall)
            elif idle is not None and now - self._busy_at.get(name, now) >= idle * 60.0:
                if self.shared and self._busy_elsewhere(name, now, idle * 60.0):
                    continue  # in use on another process of the cluster
                try:
                    await self.close(name, "idle")
                except OSError as e:
                    log.warning("idle room %s cannot be closed now (%s)", name, e)
                    continue
                closed.append(name)
        return closed

    def _busy_elsewhere(self, name: str, now: float, idle_s: float) -> bool:
        """Another process said the room is in use (its mark changed) less than `idle_s` ago by
        this process's clock."""
        mark = self.store.busy_at(name)
        if mark is None:
            self._marks_seen.pop(name, None)
            return False
        seen = self._marks_seen.get(name)
        if seen is None or seen[0] != mark:
            seen = self._marks_seen[name] = (mark, now)
        return now - seen[1] < idle_s

    def _sweep_every_s(self) -> float:
        return min(60.0, (self.limits.idle_close_min or 1) * 60.0 / 4)

    async def _say_busy(self, name: str, wall: float) -> None:
        """In a cluster: the room is in use here, said in the store once a sweep or so."""
        if not self.shared or wall - self._marked.get(name, -1e18) < self._sweep_every_s() / 2:
            return
        try:
            await self.store.mark_busy(name, wall)
        except OSError as e:
            log.warning("room %s: its use cannot be said to the cluster now (%s)", name, e)
            return
        self._marked[name] = wall

    async def _sweep_forever(self) -> None:
        every_s = self._sweep_every_s()
        while True:
            await asyncio.sleep(every_s)
            try:
                await self.sweep()
            except Exception:  # the sweeper must live on: the next sweep tries again
                log.exception("sweeping the idle rooms failed")

    # ------------------------------------------------------------------ helpers
    def _channel(self, room: Room) -> ChannelConfig:
        return ChannelConfig(name=room.name, output="browser", colors=room.colors)

    def _new_name(self) -> str:
        while True:
            name = "r-" + "".join(secrets.choice(ID_ALPHABET) for _ in range(8))
            # never a channel's, nor any earlier room's (its journals are in its folder)
            if (name not in self.hall.channels and name not in self._rooms
                    and not (self.config.journal_dir / name).exists()):
                return name


def _too_many(org_name: str, most: int) -> RoomRefused:
    return RoomRefused("too_many_rooms", f"{org_name} has {most} rooms open, the most it may",
                       "close a room you no longer use, or ask the association's admin for a "
                       "larger quota")


def _server_full(most: int) -> RoomRefused:
    return RoomRefused("server_full", f"this server has {most} rooms open, the most it takes "
                       "(rooms.max_open)",
                       "close a room you no longer use, or ask the association's admin")
