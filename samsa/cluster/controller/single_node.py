"""Today's single-node controller: validates and applies topic, partition and config changes by
writing JSON metadata records (metadata/legacy.py), then makes the log manager match the image.
Replaced by `quorum.QuorumController` once the broker runs on the KRaft quorum."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence

from samsa.config import (
    TOPIC_CONFIGS,
    BrokerConfig,
    ConfigError,
    validate_broker_configs,
    validate_topic_configs,
)
from samsa.protocol.errors import Err
from samsa.storage.log import LogConfig
from samsa.storage.manager import LogManager

from ..limits import ControllerError, check_broker_budget, check_replica_list
from ..metadata import MetadataImage, MetadataLog
from .validation import collision_key, validate_topic_name

__all__ = ["Controller", "ControllerError", "validate_topic_name"]

PRODUCER_ID_BLOCK = 1000


class Controller:
    def __init__(self, config: BrokerConfig, meta: MetadataLog, logs: LogManager) -> None:
        self.config = config
        self.meta = meta
        self.logs = logs
        self._pid_next = 0
        self._pid_limit = 0

    @property
    def image(self) -> MetadataImage:
        return self.meta.image

    def topic_configs(self, name: str) -> dict[str, str]:
        """Effective topic configs: broker defaults overlaid with the topic's own."""
        eff = self.config.topic_defaults()
        eff.update(self.image.broker_configs_for_topics())
        t = self.image.topics.get(name)
        if t is not None:
            eff.update(t.configs)
        return eff

    def log_config(self, name: str) -> LogConfig:
        return LogConfig.from_topic(self.topic_configs(name))

    async def ensure_cluster_id(self) -> None:
        if not self.image.cluster_id:
            cid = self.config.get("cluster.id") or _new_cluster_id()
            await self.meta.write([{"type": "cluster", "cluster_id": cid}])

    @property
    def node_ids(self) -> frozenset[int]:
        """The registered brokers: this one."""
        return frozenset((self.config.node_id,))

    def partition_total(self) -> int:
        """Partitions hosted by this broker (all topics, internal ones included)."""
        return sum(t.partitions for t in self.image.topics.values())

    def check_budget(self, adding: int) -> None:
        """Refuse (POLICY_VIOLATION) what would exceed max.broker.partitions."""
        check_broker_budget(self.partition_total(), adding,
                            self.config.get_int("max.broker.partitions"))

    async def create_topic(self, name: str, partitions: int, replication: int,
                           configs: dict[str, str | None], validate_only: bool = False,
                           internal: bool = False) -> uuid.UUID:
        """Checks in the order of Kafka's controller (name, existence, configs, replication factor,
        partitions, then the broker's partition budget) and writes nothing unless all pass.
        `partitions`/`replication` of -1 take the broker defaults. Internal topics (sized by the
        broker's own configs) are not held to max.broker.partitions."""
        validate_topic_name(name)
        if name in self.image.topics:
            raise ControllerError(Err.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        collide = collision_key(name)
        for other in self.image.topics:
            if collision_key(other) == collide:
                raise ControllerError(Err.INVALID_TOPIC_EXCEPTION,
                                      f"Topic '{name}' collides with existing topic: {other}")
        try:
            validate_topic_configs(configs)
        except ConfigError as e:
            raise ControllerError(Err.INVALID_CONFIG, str(e)) from None
        if replication < -1 or replication == 0:
            raise ControllerError(Err.INVALID_REPLICATION_FACTOR,
                                  "Replication factor must be larger than 0, or -1 to use the "
                                  "default value.")
        if partitions < -1 or partitions == 0:
            raise ControllerError(Err.INVALID_PARTITIONS,
                                  "Number of partitions was set to an invalid non-positive value.")
        if partitions == -1:
            partitions = self.config.get_int("num.partitions")
        if replication == -1:
            replication = self.config.get_int("default.replication.factor")
        if replication > len(self.node_ids):
            raise ControllerError(Err.INVALID_REPLICATION_FACTOR,
                                  f"Unable to replicate the partition {replication} time(s): "
                                  "The target replication factor of "
                                  f"{replication} cannot be reached because only "
                                  f"{len(self.node_ids)} broker(s) are registered.")
        if not internal:
            self.check_budget(partitions)
        topic_id = uuid.uuid4()
        if validate_only:
            return topic_id
        clean = {k: v for k, v in configs.items() if v is not None}
        await self.meta.write([{"type": "topic", "name": name, "topic_id": str(topic_id),
                                "partitions": partitions, "configs": clean,
                                "internal": internal}])
        await self._open_logs(name, topic_id, 0, partitions)
        return topic_id

    async def _open_logs(self, name: str, topic_id: uuid.UUID, start: int, end: int) -> None:
        """Create the logs of partitions start..end-1, letting other requests run between two:
        a partition costs milliseconds (files, fsync), so thousands would hold the event loop for
        seconds. Stops if the topic is deleted (or replaced) meanwhile."""
        cfg = self.log_config(name)
        for p in range(start, end):
            t = self.image.topics.get(name)
            if t is None or t.topic_id != topic_id:
                return
            self.logs.create(name, p, cfg)
            await asyncio.sleep(0)

    async def delete_topic(self, name: str) -> None:
        if name not in self.image.topics:
            raise ControllerError(Err.UNKNOWN_TOPIC_OR_PARTITION,
                                  "This server does not host this topic-partition.")
        if not self.config.get_bool("delete.topic.enable"):
            raise ControllerError(Err.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
        await self.meta.write([{"type": "remove_topic", "name": name}])
        self.logs.delete_topic(name)

    async def create_partitions(self, name: str, count: int, validate_only: bool,
                                assignments: Sequence[Sequence[int]] | None = None) -> None:
        """Grow a topic to `count` partitions; everything is checked before anything is written."""
        t = self.image.topics.get(name)
        if t is None:
            raise ControllerError(Err.UNKNOWN_TOPIC_OR_PARTITION,
                                  "This server does not host this topic-partition.")
        if count == t.partitions:
            raise ControllerError(Err.INVALID_PARTITIONS,
                                  f"Topic already has {t.partitions} partition(s).")
        if count < t.partitions:
            raise ControllerError(Err.INVALID_PARTITIONS,
                                  f"The topic {name} currently has {t.partitions} partition(s); "
                                  f"{count} would not be an increase.")
        additional = count - t.partitions
        if assignments is not None:
            if len(assignments) != additional:
                raise ControllerError(Err.INVALID_REPLICA_ASSIGNMENT,
                                      f"Attempted to add {additional} additional partition(s), but "
                                      f"only {len(assignments)} assignment(s) were specified.")
            for broker_ids in assignments:
                check_replica_list(broker_ids, self.node_ids, 1)
        self.check_budget(additional)
        if validate_only:
            return
        old = t.partitions
        await self.meta.write([{"type": "partitions", "name": name, "partitions": count}])
        await self._open_logs(name, t.topic_id, old, count)

    async def alter_topic_configs(self, name: str, changes: dict[str, str | None],
                                  validate_only: bool) -> None:
        if name not in self.image.topics:
            raise ControllerError(Err.UNKNOWN_TOPIC_OR_PARTITION,
                                  f"The topic '{name}' does not exist.")
        try:
            validate_topic_configs(changes)
        except ConfigError as e:
            raise ControllerError(Err.INVALID_CONFIG, str(e)) from None
        if validate_only:
            return
        await self.meta.write([{"type": "topic_config", "name": name, "configs": changes}])
        self.logs.update_config(name, self.log_config(name))

    async def alter_broker_configs(self, changes: dict[str, str | None],
                                   validate_only: bool, node: str = "") -> None:
        """Dynamic broker settings (Kafka's log.* synonyms of topic configs): cluster-wide
        defaults (node "") or this broker's own (node = its id)."""
        by_syn = {d.broker_synonym: d for d in TOPIC_CONFIGS.values() if d.broker_synonym}
        for k, v in changes.items():
            d = by_syn.get(k)
            if d is None:
                raise ControllerError(Err.INVALID_CONFIG,
                                      f"Cannot update broker config {k} dynamically")
            if v is not None:
                try:
                    validate_broker_configs({k: v})
                except ConfigError as e:
                    raise ControllerError(Err.INVALID_CONFIG, str(e)) from None
        if validate_only:
            return
        await self.meta.write([{"type": "broker_config", "configs": changes, "node": node}])
        for name in self.image.topics:
            self.logs.update_config(name, self.log_config(name))

    async def allocate_producer_id(self) -> int:
        if self._pid_next >= self._pid_limit:
            start = self.image.next_producer_id
            await self.meta.write([{"type": "producer_ids", "next": start + PRODUCER_ID_BLOCK}])
            self._pid_next, self._pid_limit = start, start + PRODUCER_ID_BLOCK
        pid = self._pid_next
        self._pid_next += 1
        return pid


def _new_cluster_id() -> str:
    import base64
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
