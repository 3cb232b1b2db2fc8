"""The glue between Starlette and the views: each view is a plain blocking function of a `Req`
(run on the thread pool, so admin calls never block an event loop) returning a Response; every
failure becomes a page that says what went wrong, never a stack trace."""

from __future__ import annotations

import ipaddress
import logging
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from . import html as h
from .cluster import ConsoleError
from .codec import EncodeError
from .registry import RegistryError
from .state import COOKIE, ConsoleState, Session

log = logging.getLogger("samsa.console")
MAX_FORM_BYTES = 1 << 20


@dataclass
class Req:
    request: Request
    state: ConsoleState
    session: Session
    form: dict[str, str]

    @property
    def path(self) -> dict[str, Any]:
        return dict(self.request.path_params)

    @property
    def query(self) -> Any:
        return self.request.query_params

    @property
    def user(self) -> str | None:
        return self.session.user or None

    def page(self, title: str, body: str, active: str = "", status: int = 200, **kw: Any) -> HTMLResponse:
        if not kw.get("notice"):
            kw["notice"] = self.query.get("notice")
        return HTMLResponse(h.page(title, body, active=active, user=self.user, **kw), status)


def redirect(path: str, notice: str | None = None) -> RedirectResponse:
    if notice:
        path += ("&" if "?" in path else "?") + h.qs(notice=notice)
    return RedirectResponse(path, status_code=303)


def error_page(title: str, message: str, status: int, user: str | None = None) -> HTMLResponse:
    body = '<p><a href="javascript:history.back()">Back</a> · <a href="/">Overview</a></p>'
    return HTMLResponse(h.page(title, body, error=message, user=user), status)


View = Callable[[Req], Response]


async def read_body(request: Request, limit: int) -> bytes | None:
    """The request's body, or None once it is larger than `limit` (a Content-Length over it is
    refused before anything is read): a huge or endless POST must not grow the broker's memory
    or hold a thread waiting for bytes that are never used."""
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            if int(declared) > limit:
                return None
        except ValueError:
            return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _loopback(host: str) -> bool:
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class LoopbackHostGuard:
    """DNS rebinding: a page of another site whose name is made to resolve to 127.0.0.1 is, to the
    browser, its own origin, so its requests pass the Origin check and it can read pages and post
    forms. A console listening on a loopback address answers only requests whose Host names a
    loopback address (localhost, 127.0.0.1, [::1]); others get 403."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope.get("server") and _loopback(str(scope["server"][0])):
            host = next((v.decode("latin-1") for k, v in scope.get("headers", ())
                         if k == b"host"), None)
            name = urllib.parse.urlsplit(f"//{host}").hostname if host else None
            if host is not None and (name is None or not _loopback(name)):
                page = error_page("Not allowed", "this console answers only to a loopback host name "
                                  "(localhost, 127.0.0.1)", 403)
                await page(scope, receive, send)
                return
        await self.app(scope, receive, send)


def cross_site(request: Request) -> bool:
    """A POST another site's page made the browser send (its Origin is not this console): refused,
    so a page elsewhere cannot delete a topic through a console on localhost. Clients that send no
    Origin (curl, scripts) are not browsers acting for another site."""
    origin = request.headers.get("origin")
    if origin is None:
        return False
    host = request.headers.get("host", "")
    return origin == "null" or urllib.parse.urlsplit(origin).netloc != host


def view(state: ConsoleState, fn: View) -> Callable[[Request], Any]:
    async def endpoint(request: Request) -> Response:
        session = state.session(request.cookies.get(COOKIE))
        if session is None:
            return RedirectResponse("/login?" + h.qs(next=request.url.path), status_code=303)
        form: dict[str, str] = {}
        if request.method == "POST" and cross_site(request):
            return error_page("Not allowed", "a form from another site cannot change this cluster", 403,
                              session.user)
        if request.method == "POST":
            body = await read_body(request, MAX_FORM_BYTES)
            if body is None:
                return error_page("Too large", "the form is larger than 1 MiB", 413, session.user)
            try:
                parsed = urllib.parse.parse_qs(body.decode("utf-8"), keep_blank_values=True,
                                               max_num_fields=2000)
            except (UnicodeDecodeError, ValueError) as e:
                return error_page("Bad form", f"the form could not be read: {e}", 400, session.user)
            form = {k: v[-1] for k, v in parsed.items()}
        req = Req(request, state, session, form)
        try:
            return await run_in_threadpool(fn, req)
        except ConsoleError as e:
            return error_page(_title(e.status), str(e), e.status, session.user)
        except RegistryError as e:
            return error_page("Schema registry", f"{e} (HTTP {e.status})",
                              e.status if 400 <= e.status < 500 or e.status == 503 else 502, session.user)
        except EncodeError as e:
            return error_page("Bad value", str(e), 400, session.user)
        except Exception as e:  # noqa: BLE001 - the page names it; the log has the trace
            log.exception("console view %s failed", request.url.path)
            return error_page("Something went wrong",
                              f"{type(e).__name__}: {str(e)[:300]} (details in the server log)", 500,
                              session.user)
    return endpoint


def _title(status: int) -> str:
    return {404: "Not found", 401: "Not signed in", 403: "Not allowed", 409: "Refused",
            503: "Cluster unreachable", 504: "Timed out"}.get(status, "Cannot do that")
