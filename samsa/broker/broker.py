"""The Broker: wires storage, metadata, controller and handlers to the listeners."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any

from samsa.cluster.controller import Controller, ControllerError
from samsa.cluster.internal_topic import InternalTopic
from samsa.cluster.metadata import MetadataLog
from samsa.config import BrokerConfig
from samsa.coordinator.group.coordinator import GroupConfig, GroupCoordinator
from samsa.coordinator.txn.coordinator import TransactionCoordinator, TxnConfig
from samsa.protocol import apis
from samsa.protocol.codec import warm_up
from samsa.protocol.records import CONTROL_ABORT, CONTROL_COMMIT
from samsa.storage.cleaner import CleanerConfig
from samsa.storage.log import PartitionLog
from samsa.storage.manager import LogManager

from .fetch_sessions import FetchSessionCache
from .handlers import HANDLERS
from .server import KafkaConnection, NetworkLimits

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
        self.txn: TransactionCoordinator
        self.handlers: dict[int, Any] = HANDLERS
        self.connections: set[KafkaConnection] = set()
        self.network_limits = NetworkLimits(
            max_request=config.get_int("socket.request.max.bytes"),
            queued_max=config.get_int("queued.max.requests"),
            per_connection=config.get_int("queued.max.requests.per.connection"),
            max_connections=config.get_int("max.connections"),
            max_per_ip=config.get_int("max.connections.per.ip"))
        self.server: asyncio.AbstractServer | None = None
        self.host = self.bind_host
        self.port = self.bind_port
        self._stopped = asyncio.Event()
        self.fetch_sessions = FetchSessionCache(
            int(config.get("max.incremental.fetch.session.cache.slots") or 1000))

    async def start(self) -> None:
        warm_up(apis.SUPPORTED)
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
        self.txn = self._txn_coordinator()
        self.txn.load()
        self.txn.start()
        self._producer_expiry = asyncio.create_task(self._expire_producers_loop())
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
            retention_check_ms=c.get_int("offsets.retention.check.interval.ms"),
            consumer_heartbeat_ms=c.get_int("group.consumer.heartbeat.interval.ms"),
            consumer_session_ms=c.get_int("group.consumer.session.timeout.ms"))
        return GroupCoordinator(topic, cfg,
                                lambda t, p: self.logs.get(t, p) is not None)

    def _txn_coordinator(self) -> TransactionCoordinator:
        c = self.config
        topic = InternalTopic(self.controller, self.logs, "__transaction_state",
                              c.get_int("transaction.state.log.num.partitions"),
                              {"cleanup.policy": "compact", "segment.bytes": "104857600"})
        cfg = TxnConfig(
            max_timeout_ms=c.get_int("transaction.max.timeout.ms"),
            check_interval_ms=c.get_int(
                "transaction.abort.timed.out.transaction.cleanup.interval.ms"),
            id_expiration_ms=c.get_int("transactional.id.expiration.ms"))
        return TransactionCoordinator(
            topic, cfg, self.controller.allocate_producer_id, self._write_markers,
            lambda g: ("__consumer_offsets", self.groups.topic.partition_of(g)),
            lambda t, p: self.logs.get(t, p) is not None)

    async def _expire_producers_loop(self) -> None:
        """Idle producers' idempotence state goes after producer.id.expiration.ms (Kafka checks
        every producer.id.expiration.check.interval.ms, 10 minutes by default)."""
        expiration = self.config.get_int("producer.id.expiration.ms")
        interval = self.config.get_int("producer.id.expiration.check.interval.ms")
        while True:
            await asyncio.sleep(interval / 1000)
            now = int(time.time() * 1000)
            for lg in list(self.logs.logs.values()):
                lg.producers.expire(now, expiration)

    async def _write_markers(self, producer_id: int, epoch: int, commit: bool,
                             partitions: set[tuple[str, int]]) -> None:
        """Single node: the coordinator writes COMMIT/ABORT markers straight into the partition
        logs (what WriteTxnMarkers does between brokers), then applies transactional offsets."""
        marker = CONTROL_COMMIT if commit else CONTROL_ABORT
        flush = []
        for topic, p in sorted(partitions):
            lg = self.logs.get(topic, p)
            if lg is None:
                continue  # the topic was deleted meanwhile: nothing to mark
            lg.append_marker(producer_id, epoch, marker, 0)
            if lg.flush_due:
                flush.append(lg)
        self.groups.complete_txn(producer_id, commit)
        for lg in flush:
            await lg.flush()

    async def stop(self) -> None:
        if hasattr(self, "_producer_expiry"):
            self._producer_expiry.cancel()
        if hasattr(self, "txn"):
            self.txn.stop()
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
