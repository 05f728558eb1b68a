"""The tournament desk: `/api/tournaments/...` (entries, blocks, rounds, results, standings,
exports), its pages (`/desk`, `/standings/{t}`, `/results/{ch}`) and the printable pages; one
router of the routers by concern beside this module.

Roles: the desk is the operator's; a referee (a channel's token) enters results at the mats the
desk assigned it; the standings, the pairings and their printouts are public.
"""

from __future__ import annotations

from fastapi import APIRouter

from api.desk import blocks, entries, results, rounds, tournaments
from api.desk.deps import UPLOADS
from api.desk.pages import router as pages

router = APIRouter()
# blocks first: its /assigned before tournaments' /{tid}
for part in (blocks, tournaments, entries, rounds, results):
    router.include_router(part.router)

__all__ = ["UPLOADS", "pages", "router"]
