"""A worker process: read the worker properties, find plugins, build the herder (standalone or
distributed), serve the REST API and run until SIGINT/SIGTERM — what connect-standalone.sh and
connect-distributed.sh start."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
from pathlib import Path
from typing import Any

from ...config import read_properties
from ..errors import ConnectException
from ..plugins import Plugins
from .status import TargetState
from .worker_config import WorkerConfig

log = logging.getLogger("samsa.connect")


def read_connector_file(path: str) -> tuple[str, dict[str, str], TargetState | None]:
    """A connector given to standalone mode: a .properties file or (Kafka 3.8+) JSON, either the
    bare config or {"name", "config"[, "initial_state"]}."""
    text = Path(path).read_text()
    if path.endswith(".json") or text.lstrip().startswith("{"):
        data = json.loads(text)
        if "config" in data and isinstance(data["config"], dict):
            cfg = {str(k): str(v) for k, v in data["config"].items()}
            name = str(data.get("name") or cfg.get("name") or "")
            state = data.get("initial_state")
            return name, cfg, TargetState(state) if state else None
        cfg = {str(k): str(v) for k, v in data.items()}
        return cfg.get("name", ""), cfg, None
    cfg = read_properties(path)
    return cfg.get("name", ""), cfg, None


def kafka_cluster_id(bootstrap: str, timeout_s: float = 30.0,
                     client: dict[str, Any] | None = None) -> str:
    """The cluster id; `client`: the worker's admin settings (security). A failed TLS handshake
    or SASL login stops the worker at once with the broker's reason, as Kafka's worker fails."""
    import time

    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    from samsa.client_security import fail_on_auth_error

    conf: dict[str, Any] = {**(client or {}), "bootstrap.servers": bootstrap, "log_level": 3,
                            "error_cb": fail_on_auth_error}
    admin = AdminClient(conf)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            md = admin.list_topics(timeout=max(0.1, min(1.0, deadline - time.monotonic())))
            return str(md.cluster_id or "")
        except KafkaException as e:
            try:
                admin.poll(0)  # runs error_cb: raises a failed authentication
            except KafkaException as auth:
                raise ConnectException(f"cannot connect to the brokers at {bootstrap}: "
                                       f"{auth.args[0].str()}") from None
            if time.monotonic() >= deadline:
                raise ConnectException(f"cannot reach the brokers at {bootstrap}: {e}") from None


class WorkerProcess:
    """Owns the herder and the REST server of one worker."""

    def __init__(self, props: dict[str, Any], distributed: bool,
                 connector_files: list[str] | None = None) -> None:
        self.props = props
        self.distributed = distributed
        self.connector_files = connector_files or []
        self.config = WorkerConfig(props, distributed)
        self.herder: Any = None
        self._server: Any = None
        self.port = 0
        self.url = ""

    async def start(self) -> None:
        plugins = await asyncio.to_thread(Plugins, self.config.get("plugin.path") or [])
        cluster_id = await asyncio.to_thread(kafka_cluster_id, self.config.bootstrap, 30.0,
                                             self.config.admin_client())
        from ..rest.server import ConnectRestServer
        from ..rest.tls import rest_tls
        holder: dict[str, Any] = {}
        host, port = self.config.rest_listener()
        scheme = self.config.rest_scheme()
        tls = rest_tls(f"{scheme}://", self.config.originals)
        self._server = ConnectRestServer(
            lambda: holder["herder"], f"{scheme}://{host}:{port}", tls=tls,
            allow_origin=str(self.config.get("access.control.allow.origin") or ""),
            allow_methods=str(self.config.get("access.control.allow.methods") or ""))
        await self._server.start()
        self.port = self._server.port
        self.url = self.config.advertised_url(self.port)
        worker_id = self.config.get("worker.id") or self.url.split("://", 1)[1].rstrip("/")
        self.herder = await asyncio.to_thread(self._build_herder, plugins, str(worker_id), cluster_id)
        holder["herder"] = self.herder
        await asyncio.to_thread(self.herder.start)
        for path in self.connector_files:
            name, cfg, state = read_connector_file(path)
            await asyncio.to_thread(self.herder.put_connector_config, name, cfg, True, state)
        log.info("Kafka Connect worker %s started (%s mode) at %s", worker_id,
                 "distributed" if self.distributed else "standalone", self.url)

    def _build_herder(self, plugins: Plugins, worker_id: str, cluster_id: str) -> Any:
        from .offsets_access import offsets_for
        offsets = offsets_for(self.config)
        if self.distributed:
            from .distributed import DistributedHerder
            return DistributedHerder(self.config, plugins, worker_id, offsets, cluster_id, self.url)
        from .standalone import StandaloneHerder
        return StandaloneHerder(self.config, plugins, worker_id, offsets, cluster_id)

    async def stop(self) -> None:
        if self.herder is not None:
            await asyncio.to_thread(self.herder.stop)
        if self._server is not None:
            await self._server.stop()


async def run_worker(props: dict[str, Any], distributed: bool, connector_files: list[str]) -> None:
    proc = WorkerProcess(props, distributed, connector_files)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await proc.start()
    print(f"samsa connect: {'distributed' if distributed else 'standalone'} worker, REST API at "
          f"{proc.config.rest_scheme()}://{proc.config.rest_listener()[0]}:{proc.port}",
          flush=True)
    await stop.wait()
    await proc.stop()
