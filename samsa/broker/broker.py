"""The Broker: wires storage, metadata, controller and handlers to the listeners."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from samsa.cluster.controller import Controller, ControllerError
from samsa.cluster.internal_topic import InternalTopic
from samsa.cluster.metadata import MetadataLog
from samsa.config import BrokerConfig
from samsa.coordinator.group.coordinator import GroupConfig, GroupCoordinator
from samsa.storage.cleaner import CleanerConfig
from samsa.storage.log import PartitionLog
from samsa.storage.manager import LogManager

from .fetch_sessions import FetchSessionCache
from .handlers import HANDLERS
from .server import KafkaConnection

log = logging.getLogger("samsa.broker")


def parse_listener(value: str) -> tuple[str, str, int]:
    """'PLAINTEXT://host:port' -> (name, host, port)."""
    first = value.split(",")[0].strip()
    name, _, rest = first.partition("://")
    host, _, port = rest.rpartition(":")
    return name, host.strip("[]"), int(port)


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        _, self.bind_host, self.bind_port = parse_listener(config.get("listeners") or "")
        self.logs = LogManager(config.log_dirs, CleanerConfig.from_broker(config.get))
        self.meta: MetadataLog | None = None
        self.controller: Controller
        self.groups: GroupCoordinator
        self.handlers: dict[int, Any] = HANDLERS
        self.connections: set[KafkaConnection] = set()
        self.server: asyncio.AbstractServer | None = None
        self.host = self.bind_host
        self.port = self.bind_port
        self._stopped = asyncio.Event()
        self.fetch_sessions = FetchSessionCache(
            int(config.get("max.incremental.fetch.session.cache.slots") or 1000))

    async def start(self) -> None:
        clean = self.logs.detect_clean()
        meta_dir = self.config.log_dirs[0]
        self.meta = MetadataLog(Path(meta_dir), clean)
        image = self.meta.replay()
        self.controller = Controller(self.config, self.meta, self.logs)
        await self.controller.ensure_cluster_id()
        self.logs.startup({name: self.controller.log_config(name) for name in image.topics})
        # partitions recorded in metadata but missing on disk (e.g. crash right after creation)
        for t in image.topics.values():
            for p in range(t.partitions):
                if self.logs.get(t.name, p) is None:
                    self.logs.create(t.name, p, self.controller.log_config(t.name))
        self.groups = self._group_coordinator()
        self.groups.load()
        self.groups.start()
        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(lambda: KafkaConnection(self), self.bind_host,
                                               self.bind_port, reuse_address=True, backlog=1024)
        sock = self.server.sockets[0]
        self.port = sock.getsockname()[1]
        adv = self.config.get("advertised.listeners")
        if adv:
            _, self.host, self.port = parse_listener(adv)
        self.logs.start_background(self.config.get_int("log.retention.check.interval.ms"),
                                   self.config.get_int("log.flush.scheduler.interval.ms"))
        log.info("Samsa broker %d listening on %s:%d (cluster %s, %s start)", self.node_id,
                 self.bind_host, self.port, image.cluster_id, "clean" if clean else "recovered")

    def _group_coordinator(self) -> GroupCoordinator:
        c = self.config
        topic = InternalTopic(self.controller, self.logs, "__consumer_offsets",
                              c.get_int("offsets.topic.num.partitions"),
                              {"cleanup.policy": "compact",
                               "segment.bytes": c.get("offsets.topic.segment.bytes") or "104857600"})
        cfg = GroupConfig(
            min_session_ms=c.get_int("group.min.session.timeout.ms"),
            max_session_ms=c.get_int("group.max.session.timeout.ms"),
            initial_delay_ms=c.get_int("group.initial.rebalance.delay.ms"),
            metadata_max_bytes=c.get_int("offset.metadata.max.bytes"),
            retention_ms=c.get_int("offsets.retention.minutes") * 60000,
            retention_check_ms=c.get_int("offsets.retention.check.interval.ms"))
        return GroupCoordinator(topic, cfg,
                                lambda t, p: self.logs.get(t, p) is not None)

    async def stop(self) -> None:
        if hasattr(self, "groups"):
            self.groups.stop()
        if self.server is not None:
            self.server.close()
        for c in list(self.connections):
            c.close()
        self.logs.shutdown()
        if self.meta is not None:
            self.meta.close(clean=True)
        self._stopped.set()

    async def wait_stopped(self) -> None:
        await self._stopped.wait()

    # ---- helpers for handlers ------------------------------------------------------------
    def partition_log(self, topic: str, partition: int) -> PartitionLog | None:
        return self.logs.get(topic, partition)

    async def auto_create(self, topic: str) -> bool:
        if not self.config.get_bool("auto.create.topics.enable"):
            return False
        try:
            await self.controller.create_topic(topic, -1, -1, {})
        except ControllerError as e:
            return e.code == 36  # created concurrently
        return True
