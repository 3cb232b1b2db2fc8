"""The admin HTTP listener: a Starlette app on uvicorn in its own thread and event loop, so a slow
or hostile HTTP client never runs on (or blocks) the broker's event loop.

Routes: `/metrics` (Prometheus text format), `/health/live`, `/health/ready`; everything else goes
to the web console (`samsa.console.app.build_console(ctx)`, mounted at "/") when that package
exists, else a plain 404. Wrong methods on the fixed routes get 405.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.util
import logging
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Any
from urllib.parse import urlparse

import uvicorn
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Mount, Route

from samsa.net.bind import bind_tcp

from .context import CONSOLE_FACTORY, CONSOLE_MODULE, ConsoleContext

log = logging.getLogger("samsa.admin")

DEFAULT_LISTENER = "http://127.0.0.1:9644"


def parse_listener(listener: str) -> tuple[str, int]:
    """`http://host:port` (Kafka's listener form; only http) -> (host, port)."""
    u = urlparse(listener.strip() if "://" in listener else f"http://{listener.strip()}")
    if u.scheme != "http":
        raise ValueError(f"admin.http.listeners: only http:// is supported, got {listener!r}")
    if u.port is None:
        raise ValueError(f"admin.http.listeners: {listener!r} has no port")
    return u.hostname or "127.0.0.1", u.port


def load_console(ctx: ConsoleContext) -> Any | None:
    """The console's ASGI app, or None when samsa.console is not part of this build."""
    try:
        if importlib.util.find_spec(CONSOLE_MODULE) is None:
            return None
    except ModuleNotFoundError:
        return None
    module = importlib.import_module(CONSOLE_MODULE)
    return getattr(module, CONSOLE_FACTORY)(ctx)


def build_app(registry: CollectorRegistry, ready: Callable[[], tuple[bool, str]],
              ctx: ConsoleContext | None = None, console: bool = True) -> Starlette:
    """The admin ASGI app. `ready()` -> (ready?, why not); it must be cheap and thread-safe."""

    async def metrics(request: Request) -> Response:
        # collection may wait for the broker's loop to copy its counters: off this loop's thread
        try:
            body = await asyncio.to_thread(generate_latest, registry)
        except TimeoutError:
            return PlainTextResponse("metrics unavailable: the broker did not answer in time\n",
                                     status_code=503)
        return Response(b"" if request.method == "HEAD" else body,
                        headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def live(request: Request) -> Response:
        return JSONResponse({"status": "UP"})

    async def ready_route(request: Request) -> Response:
        ok, why = ready()
        if ok:
            return JSONResponse({"status": "UP"})
        return JSONResponse({"status": "DOWN", "reason": why}, status_code=503)

    # every method reaches these routes (a method-restricted Route would let a wrong method fall
    # through to the console's "/" mount): other methods than GET/HEAD get 405 here
    routes: list[BaseRoute] = [
        Route("/metrics", _get_only(metrics), methods=_ALL_METHODS),
        Route("/health/live", _get_only(live), methods=_ALL_METHODS),
        Route("/health/ready", _get_only(ready_route), methods=_ALL_METHODS),
    ]
    app_console = load_console(ctx) if (console and ctx is not None) else None
    if app_console is not None:
        routes.append(Mount("/", app=app_console))

    async def not_found(request: Request, exc: Exception) -> Response:
        return PlainTextResponse("Not Found\n", status_code=404)

    async def failed(request: Request, exc: Exception) -> Response:
        log.exception("admin HTTP request %s %s failed", request.method, request.url.path)
        return PlainTextResponse("Internal Server Error\n", status_code=500)

    return Starlette(routes=routes, exception_handlers={404: not_found, 500: failed})


_ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT"]


def _get_only(handler: Callable[[Request], Awaitable[Response]]
              ) -> Callable[[Request], Awaitable[Response]]:
    async def guarded(request: Request) -> Response:
        if request.method not in ("GET", "HEAD"):
            return PlainTextResponse("Method Not Allowed\n", status_code=405,
                                     headers={"Allow": "GET, HEAD"})
        return await handler(request)

    return guarded


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling: the broker's process owns the signals."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class AdminHttpServer:
    """Serves an ASGI app from a daemon thread with its own event loop. `start()` binds in the
    caller's thread (a bind error raises OSError there) and returns once uvicorn serves."""

    def __init__(self, app: Any, host: str, port: int) -> None:
        self.app = app
        self.host = host
        self.port = port
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}"

    def start(self, timeout: float = 10.0) -> None:
        sock = bind_tcp(self.host, self.port, "admin HTTP listener")
        self.port = sock.getsockname()[1]
        cfg = uvicorn.Config(self.app, host=self.host, port=self.port, log_level="warning",
                             access_log=False, lifespan="off", timeout_keep_alive=30,
                             limit_concurrency=256, loop="asyncio", http="h11")
        self._server = _Server(cfg)
        server = self._server

        def run() -> None:
            loop = asyncio.new_event_loop()
            try:
                loop.run_until_complete(server.serve(sockets=[sock]))
            except BaseException as e:  # noqa: BLE001 - reported to start() / logged
                self._error = e
                log.exception("admin HTTP listener stopped")
            finally:
                sock.close()
                loop.close()

        self._thread = threading.Thread(target=run, name="samsa-admin-http", daemon=True)
        self._thread.start()
        self._thread.join(0)
        import time

        deadline = time.monotonic() + timeout
        while not server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise OSError(f"admin HTTP listener did not start on {self.host}:{self.port}"
                              + (f": {self._error}" if self._error else ""))
            time.sleep(0.01)

    def stop(self, timeout: float = 5.0) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
