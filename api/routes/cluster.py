"""The cluster as one process sees it (`yomite serve --bus`): which process owns each channel."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from api.deps import Op
from api.errors import ApiError
from api.models import ERRORS, ClusterAnswer

router = APIRouter(tags=["health"])


@router.get("/api/cluster", response_model=ClusterAnswer, responses=ERRORS)
async def cluster(request: Request, _p: Op) -> dict[str, Any]:
    """This process's name, the live processes, and each channel's owner (operator only);
    404 when the server is not one of a cluster's."""
    member = getattr(request.app.state, "cluster", None)
    if member is None:
        raise ApiError(404, "not_a_cluster", "this server is not one of a cluster's",
                       "start it with yomite serve --bus nats://HOST:4222")
    out: dict[str, Any] = await member.describe()
    return out
