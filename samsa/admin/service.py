"""The broker's side of the admin listener: which address (`admin.http.listeners`), the metrics
registry fed from the broker's loop, readiness, and the console's context.

`admin.http.listeners` takes Kafka's listener form (`http://host:port`, port 0: a free one). Unset,
the embedded single-node default listens on http://127.0.0.1:9644 (a busy port there is logged
and skipped, never fatal) and a cluster node has none; an empty value turns it off.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from samsa.metrics.collector import SnapshotCollector, build_registry
from samsa.metrics.snapshot import Family, flatten, take

from .context import ConsoleContext
from .http import DEFAULT_LISTENER, AdminHttpServer, build_app, parse_listener

if TYPE_CHECKING:
    from samsa.broker.broker import Broker

log = logging.getLogger("samsa.admin")

CLIENT_PREFIX = "admin.http.client."  # Kafka client settings for the console
REGISTRY_PREFIX = "admin.http.registry."  # schema registry client settings (Confluent's names)


class AdminService:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.ready = False
        self.why_not = "starting: metadata not loaded yet"
        self.server: AdminHttpServer | None = None
        self.ctx: ConsoleContext | None = None
        # more families (the embedded registry's, Connect's): called on the broker's loop
        self.extra: list[Callable[[], list[Family]]] = []

    def _address(self) -> tuple[str, int, bool] | None:
        """(host, port, explicitly configured) or None when off."""
        value = self.broker.config.values.get("admin.http.listeners")
        if value is None:
            if not getattr(self.broker.node, "embedded", False):
                return None
            host, port = parse_listener(DEFAULT_LISTENER)
            return host, port, False
        value = value.split(",")[0].strip()
        if not value:
            return None
        host, port = parse_listener(value)
        return host, port, True

    @property
    def url(self) -> str | None:
        return self.server.url if self.server is not None else None

    async def _take(self) -> list[Family]:
        families = take(self.broker, self.ready)
        for more in self.extra:
            try:
                families += more()
            except Exception:  # a component's metrics must never cost the broker's
                log.exception("metrics of %r failed", more)
        return families

    def _ready(self) -> tuple[bool, str]:
        return self.ready, self.why_not

    async def start(self) -> None:
        """Listen (before recovery, so /health/live answers while partitions load)."""
        address = self._address()
        if address is None:
            return
        host, port, explicit = address
        loop = asyncio.get_running_loop()
        collector = SnapshotCollector(loop, self._take)
        registry = build_registry(collector)
        b = self.broker
        first = b.broker_listeners[0] if b.broker_listeners else None
        bootstrap = f"{'127.0.0.1' if not first or first.host in ('', '0.0.0.0') else first.host}:" \
                    f"{first.port if first else 0}"
        client = {k[len(CLIENT_PREFIX):]: v for k, v in b.config.values.items()
                  if k.startswith(CLIENT_PREFIX)}
        if first is not None and first.security_protocol != "PLAINTEXT":
            client.setdefault("security.protocol", first.security_protocol)

        def metrics_snapshot() -> dict[str, list[tuple[dict[str, str], float]]]:
            return flatten(collector.families())

        registry_client = {k[len(REGISTRY_PREFIX):]: v for k, v in b.config.values.items()
                           if k.startswith(REGISTRY_PREFIX)}
        self.ctx = ConsoleContext(bootstrap_servers=bootstrap, client_config=client,
                                  registry_config=registry_client,
                                  metrics_snapshot=metrics_snapshot, node_id=b.node_id)
        app = build_app(registry, self._ready, self.ctx)
        server = AdminHttpServer(app, host, port)
        try:
            await asyncio.to_thread(server.start)
        except OSError as e:
            if explicit:
                raise
            log.warning("%s; no admin HTTP listener (set admin.http.listeners)", e)
            return
        self.server = server
        log.info("admin HTTP listener (metrics, health, console) on %s", server.url)

    def started(self) -> None:
        """The broker is serving: metadata loaded, partitions recovered."""
        self.ready = True
        self.why_not = ""
        if self.ctx is not None and self.broker.broker_listeners:
            # the real port once bound (port 0 in the config)
            host = self.ctx.bootstrap_servers.rsplit(":", 1)[0]
            self.ctx.bootstrap_servers = f"{host}:{self.broker.port}"

    def stopping(self) -> None:
        self.ready = False
        self.why_not = "shutting down"

    async def stop(self) -> None:
        if self.server is not None:
            await asyncio.to_thread(self.server.stop)
            self.server = None
