"""Running a registry: the store, the service and the HTTP server on uvicorn, either inside
`samsa serve` (same event loop as the broker) or standalone (`samsa registry`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

import uvicorn

from samsa.config import ConfigError
from samsa.net.bind import bind_tcp

from . import storeconf
from .api import DEFAULT_MAX_BODY, RegistryApp
from .auth import AuthMiddleware, BasicAuth
from .kafkastore import KafkaStore
from .records import TOPIC
from .service import Registry
from .state import RegistryState
from .tls import forwarding_context, server_context

log = logging.getLogger("samsa.registry")


@dataclass
class RegistryConfig:
    bootstrap: str
    listener: str = "http://127.0.0.1:8081"  # Confluent's `listeners`: http:// and https:// URLs
    topic: str = TOPIC
    leader_url: str | None = None  # None: this instance is the single writer
    compatibility: str = "BACKWARD"
    max_request_bytes: int = DEFAULT_MAX_BODY
    timeout_s: float = 30.0
    # Confluent Schema Registry's other settings by their names: authentication.*, ssl.*,
    # kafkastore.* (docs/security.md, "Schema registry")
    props: dict[str, str] = field(default_factory=dict)

    def get(self, name: str) -> str | None:
        return self.props.get(name)

    @property
    def listeners(self) -> list[tuple[str, str, int]]:
        """(scheme, host, port) of each listener; ConfigError for another scheme."""
        out = []
        for item in (x.strip() for x in self.listener.split(",") if x.strip()):
            u = urlparse(item if "://" in item else f"http://{item}")
            if u.scheme not in ("http", "https"):
                raise ConfigError(f"listeners: {item!r} is neither http:// nor https://")
            out.append((u.scheme, u.hostname or "127.0.0.1", u.port or 8081))
        if not out:
            raise ConfigError("listeners: no listener")
        return out

    @property
    def host_port(self) -> tuple[str, int]:
        _, host, port = self.listeners[0]
        return host, port


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling: the process that embeds it owns the signals."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class RegistryServer:
    def __init__(self, config: RegistryConfig) -> None:
        """Checks every setting (ConfigError) before anything starts: users, key stores."""
        self.config = config
        get = config.get
        self.auth = BasicAuth.from_settings(get)
        self.tls = {(host, port): server_context(get, f"{scheme}://{host}:{port}")
                    for scheme, host, port in config.listeners if scheme == "https"}
        forward = forwarding_context(get) if (config.leader_url or "").startswith("https:") else None
        self.state = RegistryState()
        self.store = KafkaStore(storeconf.bootstrap(get, config.bootstrap), config.topic, self.state,
                                timeout_s=config.timeout_s, security=storeconf.client_config(get))
        self.registry = Registry(self.state, self.store, config.compatibility)
        self.app = RegistryApp(self.registry, config.leader_url, self.store.sync,
                               config.max_request_bytes, forward)
        self.asgi: Any = self.app.app if self.auth is None else AuthMiddleware(self.app.app, self.auth)
        self._servers: list[_Server] = []
        self._tasks: list[asyncio.Task[None]] = []
        self.port = 0
        self.urls: list[str] = []

    @property
    def url(self) -> str:
        """The first listener's URL (with the port it got)."""
        return self.urls[0]

    async def start(self) -> None:
        """Replay `_schemas` (in a thread: the broker may be serving on this loop) and listen."""
        await asyncio.to_thread(self.store.start)
        for scheme, host, port in self.config.listeners:
            cfg = uvicorn.Config(self.asgi, host=host, port=port, log_level="warning",
                                 access_log=False, lifespan="off", timeout_keep_alive=30)
            cfg.load()
            cfg.ssl = self.tls.get((host, port))  # our context: PEM stores, client auth
            server = _Server(cfg)
            # bound here: uvicorn would sys.exit() on a bind error, ending the embedding broker
            sock = bind_tcp(host, port, "schema registry")
            task = asyncio.create_task(server.serve(sockets=[sock]))
            self._servers.append(server)
            self._tasks.append(task)
            while not server.started:
                if task.done():
                    task.result()
                    raise OSError(f"schema registry could not listen on {host}:{port}")
                await asyncio.sleep(0.02)
            bound = sock.getsockname()[1]
            self.urls.append(f"{scheme}://{host}:{bound}")
        self.port = int(self.urls[0].rsplit(":", 1)[1])
        log.info("schema registry listening on %s (%s, %s, %d schemas)", ", ".join(self.urls),
                 "leader" if not self.config.leader_url else f"follower of {self.config.leader_url}",
                 "basic authentication" if self.auth else "no authentication",
                 len(self.state.schemas))

    async def stop(self) -> None:
        for server in self._servers:
            server.should_exit = True
        for task in self._tasks:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(task, 10)
        await asyncio.to_thread(self.store.stop)
