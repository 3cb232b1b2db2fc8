"""The console served by uvicorn on a thread of the test process (its own event loop), for the
browser and bad-input tests, until the broker's admin listener serves it."""

from __future__ import annotations

import threading
import time
import urllib.request
from types import TracebackType

import uvicorn

from samsa.console.app import build_console
from samsa.console.context import ConsoleContext
from samsa.testing import free_port


class ConsoleServer:
    def __init__(self, ctx: ConsoleContext) -> None:
        self.port = free_port()
        self.app = build_console(ctx)
        self.server = uvicorn.Server(uvicorn.Config(self.app, host="127.0.0.1", port=self.port,
                                                    log_level="warning", lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> ConsoleServer:
        self.thread.start()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self.url + "/static/console.css", timeout=1):
                    return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("console did not start")

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.server.should_exit = True
        self.thread.join(10)
