"""Who may see a tournament outside the desk (an association's server holds every school's
children): the desk (the admin's token, or its print pass, a cookie for the printed pages that
open in a tab of their own), or whoever holds the tournament's public link (`?view=KEY`, made
and revoked by the desk), which shows the standings, the pairings and their printed pages,
never the desk's own. Anyone else is told what to ask for, the same whether the tournament
exists or not."""

from __future__ import annotations

import hmac
import time
from enum import Enum

from fastapi import Request, Response

from api.deps import auth_of, token_of
from api.desk.deps import desk_of
from api.errors import ApiError
from desk.errors import NotFound
from desk.model import Tournament

VIEW = "view"  # the query parameter that carries a public link's key
PRINT_COOKIE = "yomite_desk_print"
PRINT_AGE_S = 12 * 3600  # a day's desk work; the desk page renews it at every visit


class Reader(Enum):
    DESK = "desk"
    PUBLIC = "public"  # through the tournament's public link


def is_desk(request: Request) -> bool:
    """The admin's token in the request, or the desk's print pass (a cookie)."""
    auth = auth_of(request)
    token = token_of(request)
    if token:
        try:
            return auth.identify(token).admin
        except PermissionError:
            return False
    return auth.print_pass_valid(request.cookies.get(PRINT_COOKIE), time.time())


def give_print_pass(request: Request, response: Response) -> None:
    """Set the desk's print pass on `response` (the caller checked the admin's token)."""
    until = time.time() + PRINT_AGE_S
    response.set_cookie(PRINT_COOKIE, auth_of(request).print_pass(until), max_age=PRINT_AGE_S,
                        path="/print/", httponly=True, samesite="strict",
                        secure=request.url.scheme == "https")


def reader(request: Request, tid: str, public: bool = True) -> tuple[Tournament, Reader]:
    """The tournament `tid` and who reads it: the desk, or (where `public`) a holder of its
    public link. 401 with neither a token nor a link; 404 for a link that is not the
    tournament's (or no longer is), worded as for a tournament that does not exist."""
    if is_desk(request):
        return desk_of(request).get(tid), Reader.DESK
    key = request.query_params.get(VIEW)
    if not public or not key:
        what = ("the desk's sign-in" if not public
                else "the desk's sign-in or the tournament's public link")
        raise ApiError(401, "link_needed", f"this page needs {what}",
                       "open it from the desk (/desk), or ask the organiser for the "
                       "standings' link or its QR code")
    t: Tournament | None
    try:
        t = desk_of(request).get(tid)
    except NotFound:  # answered as a wrong link: the same words
        t = None
    if t is None or t.public_link is None or not hmac.compare_digest(
            key.encode(), t.public_link.encode()):
        raise ApiError(404, "no_such_link", "this link is not (or no longer) a tournament's "
                       "public link", "ask the organiser for the current link or QR code")
    return t, Reader.PUBLIC
