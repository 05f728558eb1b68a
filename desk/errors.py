"""The desk's errors: each says what was wrong and what to do. The API maps them to 404 (not
found), 409 (a step out of order) and 422 (bad input), with the same JSON body as the rest.

The code is the class's, or one more precise given where the error is raised
(`Invalid(..., code="cards_over_read")`): the pages show every code in their language
(`err_<code>` in api/static/desk-strings.*.json), with the error's figures (`params`: a
line number, a column, a mat) in their words."""

from __future__ import annotations


class DeskError(Exception):
    status = 400
    code = "desk_error"

    def __init__(self, detail: str, hint: str = "", *, code: str | None = None,
                 params: dict[str, int | str] | None = None) -> None:
        self.detail = detail
        self.hint = hint
        self.params = params or {}
        if code is not None:
            self.code = code
        super().__init__(detail)


class NotFound(DeskError):
    status = 404
    code = "not_found"


class Conflict(DeskError):
    """A step the tournament is not ready for (pairing round 3 before round 2's results)."""

    status = 409
    code = "out_of_order"


class Stale(Conflict):
    """A change computed from a version of the tournament that is no longer the latest:
    another process of a cluster (or another server on the same database) changed it first.
    The desk's store loads the latest and computes the change again."""


class Invalid(DeskError):
    """Input that cannot be right (a CSV line without a name, 30 cards of 17)."""

    status = 422
    code = "invalid"


class Forbidden(DeskError):
    """A referee entering a result at a mat it is not assigned."""

    status = 403
    code = "forbidden"


class StorageError(DeskError):
    """The desk's database cannot be opened or failed (HTTP 503)."""

    status = 503
    code = "storage_unavailable"
