"""`build_console(ctx)`: the console as a Starlette app, mounted by the admin HTTP listener at `/`
(or served alone by `python -m samsa.console`). Unknown paths and methods get plain pages; no
page ever shows a stack trace."""

from __future__ import annotations

import urllib.parse
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from . import html as h
from . import views_admin, views_groups, views_messages, views_schemas, views_topics
from .cluster import ConsoleError
from .context import Live
from .state import COOKIE, SESSION_TTL_S, ConsoleState
from .web import LoopbackHostGuard, cross_site, error_page, read_body

STATIC = Path(__file__).with_name("static")
MAX_LOGIN_BYTES = 65536


def _login_page(next_path: str, error: str | None = None, status: int = 200) -> HTMLResponse:
    form = h.form("/login", f'<input type="hidden" name="next" value="{h.e(next_path)}">'
                  + h.field("User", "username", attrs='autocomplete="username" required')
                  + h.field("Password", "password", kind="password",
                            attrs='autocomplete="current-password" required')
                  + "<button>Sign in</button>", cls="stack")
    body = "<p>This cluster uses SASL: sign in with your Kafka credentials.</p>" + form
    return HTMLResponse(h.page("Sign in", body, error=error), status)


def _safe_next(path: str) -> str:
    return path if path.startswith("/") and not path.startswith("//") else "/"


def build_console(ctx: Any) -> Starlette:
    state = ConsoleState(Live(ctx))

    async def login(request: Request) -> Response:
        if request.method == "GET":
            if not state.login_required:
                return RedirectResponse("/", status_code=303)
            return _login_page(_safe_next(request.query_params.get("next", "/")))
        if cross_site(request):
            return error_page("Not allowed", "a form from another site cannot sign in here", 403)
        if not state.login_required:  # no SASL: no sessions (each would hold its own clients)
            return RedirectResponse("/", status_code=303)
        body = await read_body(request, MAX_LOGIN_BYTES)
        if body is None:
            return error_page("Too large", "the sign-in form is larger than 64 KiB", 413)
        form = {k: v[-1] for k, v in urllib.parse.parse_qs(body.decode("utf-8", "replace")).items()}
        nxt = _safe_next(form.get("next", "/"))
        try:
            token = await run_in_threadpool(state.sign_in, form.get("username", ""), form.get("password", ""))
        except ConsoleError as e:
            return _login_page(nxt, str(e), 401)
        resp = RedirectResponse(nxt, status_code=303)
        resp.set_cookie(COOKIE, token, max_age=SESSION_TTL_S, httponly=True, samesite="strict")
        return resp

    async def logout(request: Request) -> Response:
        state.sign_out(request.cookies.get(COOKIE))
        resp = RedirectResponse("/login" if state.login_required else "/", status_code=303)
        resp.delete_cookie(COOKIE)
        return resp

    async def not_found(request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 404)
        if status == 405:
            return error_page("Not allowed", f"{request.method} is not supported on {request.url.path}", 405)
        if status == 404:
            return error_page("Not found", f"There is no page at {request.url.path[:200]}", 404)
        return error_page("Error", str(getattr(exc, "detail", "")) or "error", status)

    async def server_error(request: Request, exc: Exception) -> Response:
        return error_page("Something went wrong", f"{type(exc).__name__} (details in the server log)", 500)

    routes: list[Any] = [
        Route("/login", login, methods=["GET", "POST"]),
        Route("/logout", logout),
        Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
        *views_topics.routes(state), *views_messages.routes(state), *views_groups.routes(state),
        *views_schemas.routes(state), *views_admin.routes(state),
    ]
    app = Starlette(routes=routes, exception_handlers={HTTPException: not_found, 500: server_error},
                    middleware=[Middleware(LoopbackHostGuard)])
    app.state.console = state
    return app
