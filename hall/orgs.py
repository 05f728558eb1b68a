"""Organisations (a school, a club) and their operators: the association's admin (the server's
operator token) makes an organisation and gives its invite code to its teachers; a teacher who
redeems the code gets a token of its own that operates the organisation's rooms only
(hall.rooms; the rule is `Principal.operates`).

An invite code is 8 letters and digits of an alphabet without look-alikes (no 0, O, 1, I, L):
31^8, about 8.5e11 codes, guessed no faster than a channel's PIN (the API checks the same
limits). It is shown to the admin like a PIN; an operator's token is kept only as its digest.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import replace

from hall.auth import Auth, digest
from hall.config import RoomsConfig
from hall.errors import RoomRefused
from hall.roomstore import Org, OrgOperator, OrgStore

CODE_ALPHABET = "23456789ABCDEFGHJKMNPQRSTUVWXYZ"
CODE_LENGTH = 8
# an organisation id and an operator id: a prefix and 8 lower-case letters or digits
ID_ALPHABET = "abcdefghijkmnpqrstuvwxyz23456789"


def new_code() -> str:
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))


def typed_code(text: str) -> str:
    """A code as a person types it: any case, spaces and hyphens (「ABCD-EFGH」) ignored."""
    return "".join(c for c in text.upper() if c not in " -\u3000")


def new_id(prefix: str) -> str:
    return prefix + "".join(secrets.choice(ID_ALPHABET) for _ in range(8))


class Orgs:
    def __init__(self, store: OrgStore, auth: Auth, defaults: RoomsConfig,
                 wall: Callable[[], float] = time.time) -> None:
        self.store = store
        self.auth = auth
        self.defaults = defaults
        self.wall = wall
        self._orgs: dict[str, Org] = {}
        self._operators: dict[str, OrgOperator] = {}
        self.reload()

    def reload(self) -> None:
        """Read the store again: what another process of a cluster changed (cluster.records)
        is known here, an operator's token works here, a removed one's dies here."""
        orgs = {o.id: o for o in self.store.orgs()}
        operators = {op.id: op for op in self.store.operators() if op.org in orgs}
        for org_id in set(self._orgs) - set(orgs):
            self.auth.forget_org_operators(org_id)
        for op_id in set(self._operators) - set(operators):
            old = self._operators[op_id]
            self.auth.forget_org_operators(old.org, op_id)
        self._orgs, self._operators = orgs, operators
        for op in operators.values():
            self.auth.set_org_operator(bytes.fromhex(op.token_digest), op.org, op.id, op.name)

    def all(self) -> list[Org]:
        return sorted(self._orgs.values(), key=lambda o: o.created)

    def get(self, org_id: str) -> Org:
        org = self._orgs.get(org_id)
        if org is None:
            raise RoomRefused("no_such_org", f"there is no organisation {org_id[:40]!r}",
                              "GET /api/orgs lists them (the admin's token)")
        return org

    def operators(self, org_id: str) -> list[OrgOperator]:
        return sorted((op for op in self._operators.values() if op.org == org_id),
                      key=lambda op: op.joined)

    async def create(self, name: str, max_open_rooms: int | None = None,
               max_clients_per_room: int | None = None) -> Org:
        """A new organisation with its invite code; OSError if it cannot be kept."""
        org_id = new_id("o-")
        while org_id in self._orgs:
            org_id = new_id("o-")
        org = Org(org_id, name, self._unused_code(),
                  max_open_rooms or self.defaults.max_open_per_org,
                  max_clients_per_room or self.defaults.max_clients_per_room, self.wall())
        await self.store.save_org(org)
        self._orgs[org.id] = org
        return org

    async def change(self, org_id: str, name: str | None = None, max_open_rooms: int | None = None,
               max_clients_per_room: int | None = None) -> Org:
        org = self.get(org_id)
        new = replace(org, name=name or org.name,
                      max_open_rooms=max_open_rooms or org.max_open_rooms,
                      max_clients_per_room=max_clients_per_room or org.max_clients_per_room)
        await self.store.save_org(new)
        self._orgs[org_id] = new
        return new

    async def rotate_code(self, org_id: str) -> Org:
        """A new invite code: the old one (and its links) stop working; the operators who
        joined keep their tokens."""
        org = replace(self.get(org_id), code=self._unused_code())
        await self.store.save_org(org)
        self._orgs[org_id] = org
        return org

    async def remove(self, org_id: str) -> Org:
        """Forget an organisation: its operators' tokens die at once (its rooms are closed by
        hall.rooms first)."""
        org = self.get(org_id)
        await self.store.drop_org(org_id)
        # (in a cluster the store's watch may have reloaded this already: pop, not del)
        self._orgs.pop(org_id, None)
        for op in self.operators(org_id):
            self._operators.pop(op.id, None)
        self.auth.forget_org_operators(org_id)
        return org

    async def redeem(self, code: str, name: str) -> tuple[Org, OrgOperator, str]:
        """A new operator of the organisation whose code this is, and its token. RoomRefused
        (wrong_code) if no organisation has it; OSError if the operator cannot be kept."""
        given = typed_code(code).encode()
        org = None
        for o in self._orgs.values():  # every code compared, in constant time each
            if hmac.compare_digest(given, o.code.encode()):
                org = o
        if org is None:
            raise RoomRefused("wrong_code", "no organisation has that invite code",
                              "check the code with your association's admin")
        token = secrets.token_urlsafe(24)
        op_id = new_id("t-")
        while op_id in self._operators:
            op_id = new_id("t-")
        op = OrgOperator(op_id, org.id, name, digest(token).hex(), self.wall())
        await self.store.save_operator(op)
        self._operators[op.id] = op
        self.auth.set_org_operator(digest(token), org.id, op.id, name)
        return org, op, token

    def _unused_code(self) -> str:
        taken = {o.code for o in self._orgs.values()}
        code = new_code()
        while code in taken:
            code = new_code()
        return code
