"""Running the Connect REST API on uvicorn inside the worker's process (on its event loop), as the
schema registry runs inside `samsa serve`. `listeners` takes Kafka's form: http://host:port, or
https://host:port with the TLS settings of rest/tls.py (KIP-208's listeners.https.ssl.*)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlparse

import uvicorn

from samsa.net.bind import bind_tcp

from .app import ConnectRestApp, HerderSource
from .tls import RestTls

log = logging.getLogger("samsa.connect.rest")

DEFAULT_LISTENER = "http://0.0.0.0:8083"


def host_port(listener: str) -> tuple[str, int]:
    u = urlparse(listener if "://" in listener else f"http://{listener}")
    return u.hostname or "0.0.0.0", 8083 if u.port is None else u.port


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling: the worker process owns the signals."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class ConnectRestServer:
    """`start()` listens (port 0 picks a free one: see `.port`), `stop()` closes."""

    def __init__(self, herder: HerderSource, listener: str = DEFAULT_LISTENER,
                 app: ConnectRestApp | None = None, tls: RestTls | None = None,
                 **options: Any) -> None:
        """`herder` may be a function returning it (see ConnectRestApp); `options` go to the
        app (CORS settings...); `tls` serves HTTPS (an https:// listener needs it)."""
        if listener.lower().startswith("https://") and tls is None:
            raise ValueError(f"listener {listener} needs TLS settings (listeners.https.ssl.*)")
        self.tls = tls
        if tls is not None and "client_tls" not in options:
            options["client_tls"] = tls.client_context()
        self.app = app or ConnectRestApp(herder, **options)
        self.host, self.port = host_port(listener)
        self._server: _Server | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        """This worker's REST URL as other workers reach it (0.0.0.0 shown as 127.0.0.1)."""
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"{'https' if self.tls is not None else 'http'}://{host}:{self.port}"

    async def start(self) -> None:
        cfg = uvicorn.Config(self.app.app, host=self.host, port=self.port, log_level="warning",
                             access_log=False, lifespan="off", timeout_keep_alive=30,
                             **(self.tls.uvicorn_options() if self.tls is not None else {}))
        self._server = _Server(cfg)
        # bound here: uvicorn would sys.exit() on a bind error, which must not end the worker
        sock = bind_tcp(self.host, self.port, "Connect REST API")
        self.port = sock.getsockname()[1]
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]))
        while not self._server.started:
            if self._task.done():
                self._task.result()
                raise OSError(f"Connect REST API could not listen on {self.host}:{self.port}")
            await asyncio.sleep(0.02)
        log.info("Connect REST API listening on %s", self.url)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._task is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._task, 10)
