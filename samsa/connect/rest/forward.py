"""Forwarding a request the herder refused with NotLeaderException to the leader worker, as Kafka
Connect's HerderRequestHandler does: a request from a user (no `forward` parameter) is sent on
with `forward=true`, one that arrived with `forward=true` is sent on with `forward=false`, and one
that arrived with `forward=false` is refused with 409 (two hops between workers at most, so a
rebalance in flight cannot make requests bounce forever)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import httpx
from starlette.requests import Request
from starlette.responses import Response

from .errors import JSON, RestError

CONFLICT_HOPS = "Cannot complete request because of a conflicting operation (e.g. worker rebalance)"
NO_LEADER = ("Cannot complete request momentarily due to no known leader URL, likely because a "
             "rebalance was underway.")


def forward_flag(request: Request) -> bool | None:
    """The request's `forward` parameter: None when absent (a user's request)."""
    raw = request.query_params.get("forward")
    return None if raw is None else raw.strip().lower() == "true"


def target_url(leader_url: str, request: Request, recursive: bool) -> str:
    """The leader's URL for this request: same path, same query, `forward` replaced."""
    params = [(k, v) for k, v in request.query_params.multi_items() if k != "forward"]
    params.append(("forward", "true" if recursive else "false"))
    return f"{leader_url.rstrip('/')}{request.url.path}?{urlencode(params)}"


async def forward(request: Request, leader_url: str | None, timeout_s: float,
                  verify: Any = None) -> Response:
    """The leader's answer to this request, relayed as it came (status and body). `verify`: the
    ssl.SSLContext for an https leader (None: httpx's default)."""
    flag = forward_flag(request)
    if flag is False:
        raise RestError(409, CONFLICT_HOPS)
    if not leader_url:
        raise RestError(409, NO_LEADER)
    url = target_url(leader_url, request, recursive=flag is None)
    body = await request.body()
    headers = {"content-type": request.headers.get("content-type", JSON), "accept": JSON}
    if "authorization" in request.headers:  # Kafka's RestClient passes the caller's credentials on
        headers["authorization"] = request.headers["authorization"]
    try:
        async with httpx.AsyncClient(timeout=timeout_s,
                                     verify=verify if verify is not None else True) as client:
            resp = await client.request(request.method, url, content=body, headers=headers)
    except httpx.HTTPError as e:
        raise RestError(500, f"IO Error trying to forward REST request: {e}") from None
    media = resp.headers.get("content-type", JSON)
    if resp.status_code == 204 or not resp.content:
        out = Response(status_code=resp.status_code)
    else:
        out = Response(resp.content, status_code=resp.status_code, media_type=media)
    if "location" in resp.headers:
        out.headers["location"] = resp.headers["location"]
    return out
