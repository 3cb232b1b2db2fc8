"""Running a registry: the store, the service and the HTTP server on uvicorn, either inside
`samsa serve` (same event loop as the broker) or standalone (`samsa registry`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlparse

import uvicorn

from .api import DEFAULT_MAX_BODY, RegistryApp
from .kafkastore import KafkaStore
from .records import TOPIC
from .service import Registry
from .state import RegistryState

log = logging.getLogger("samsa.registry")


@dataclass
class RegistryConfig:
    bootstrap: str
    listener: str = "http://127.0.0.1:8081"
    topic: str = TOPIC
    leader_url: str | None = None  # None: this instance is the single writer
    compatibility: str = "BACKWARD"
    max_request_bytes: int = DEFAULT_MAX_BODY
    timeout_s: float = 30.0

    @property
    def host_port(self) -> tuple[str, int]:
        u = urlparse(self.listener if "://" in self.listener else f"http://{self.listener}")
        return u.hostname or "127.0.0.1", u.port or 8081


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling: the process that embeds it owns the signals."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class RegistryServer:
    def __init__(self, config: RegistryConfig) -> None:
        self.config = config
        self.state = RegistryState()
        self.store = KafkaStore(config.bootstrap, config.topic, self.state, timeout_s=config.timeout_s)
        self.registry = Registry(self.state, self.store, config.compatibility)
        self.app = RegistryApp(self.registry, config.leader_url, self.store.sync,
                               config.max_request_bytes)
        self._server: _Server | None = None
        self._task: asyncio.Task[None] | None = None
        self.port = 0

    async def start(self) -> None:
        """Replay `_schemas` (in a thread: the broker may be serving on this loop) and listen."""
        await asyncio.to_thread(self.store.start)
        host, port = self.config.host_port
        cfg = uvicorn.Config(self.app.app, host=host, port=port, log_level="warning",
                             access_log=False, lifespan="off", timeout_keep_alive=30)
        self._server = _Server(cfg)
        self._task = asyncio.create_task(self._server.serve())
        while not self._server.started:
            if self._task.done():
                self._task.result()
                raise OSError(f"schema registry could not listen on {host}:{port}")
            await asyncio.sleep(0.02)
        servers = getattr(self._server, "servers", [])
        self.port = servers[0].sockets[0].getsockname()[1] if servers else port
        log.info("schema registry listening on http://%s:%d (%s, %d schemas)", host, self.port,
                 "leader" if not self.config.leader_url else f"follower of {self.config.leader_url}",
                 len(self.state.schemas))

    async def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._task is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._task, 10)
        await asyncio.to_thread(self.store.stop)
