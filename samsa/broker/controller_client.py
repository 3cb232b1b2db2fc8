"""The broker's way to the active controller: a direct call when this node is the active
controller, a request over the CONTROLLER listener otherwise (Kafka forwards the same way).

Handlers and coordinators call the methods below whatever the topology; the answers and
ControllerErrors are the same either way.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from samsa.cluster.controller import ControllerError
from samsa.cluster.metadata.image import MetadataImage, PartitionState
from samsa.cluster.node import NotControllerError
from samsa.protocol.errors import Err
from samsa.storage.log import LogConfig

from .handlers.forward import top_error

if TYPE_CHECKING:
    from samsa.broker.broker import Broker

CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS = 19, 20, 37
INCREMENTAL_ALTER_CONFIGS, ALLOCATE_PRODUCER_IDS = 44, 67
ALTER_PARTITION = 56
RETRY_S = 0.05
LEADER_POLL_S = 0.1  # how often a request to the controller checks that it is still the leader


async def call_controller(node: Any, ch: Any, api_key: int, version: int, body: Any,
                          timeout_s: float) -> Any:
    """One request to the active controller's channel, abandoned (None) as soon as the quorum
    has another leader: a frozen or cut-off old controller must not hold a broker's heartbeats
    and ISR changes for a whole request timeout (Kafka's controller channel disconnects from
    the old controller when the leader changes). ChannelError after `timeout_s`."""
    leader = node.leader_id
    task = asyncio.ensure_future(ch.request(api_key, version, body, timeout_s=timeout_s))
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=LEADER_POLL_S)
            if done:
                return task.result()
            if node.leader_id != leader:
                return None
    finally:
        if not task.done():
            task.cancel()
PRODUCER_ID_BLOCK_TIMEOUT_S = 30.0


class ControllerClient:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.node = broker.node
        self._pid_next = 0
        self._pid_limit = 0
        self._pid_lock = asyncio.Lock()

    # ---- read side (the local image) --------------------------------------------------------
    @property
    def image(self) -> MetadataImage:
        return self.node.image

    def topic_configs(self, name: str) -> dict[str, str]:
        """Effective topic configs: broker defaults overlaid with dynamic broker configs, then the
        topic's own."""
        eff = self.broker.config.topic_defaults()
        eff.update(self.image.broker_configs_for_topics(self.node.node_id))
        t = self.image.topics.get(name)
        if t is not None:
            eff.update(t.configs)
        return eff

    def log_config(self, name: str) -> LogConfig:
        return LogConfig.from_topic(self.topic_configs(name))

    @property
    def node_ids(self) -> frozenset[int]:
        return frozenset(b.broker_id for b in self.image.live_brokers())

    # ---- write side ----------------------------------------------------------------------------
    @property
    def local(self) -> Any:
        """The QuorumController when this node is the active controller, else None."""
        return self.node.controller if self.node.active else None

    async def _remote(self, api_key: int, version: int, body: dict[str, Any],
                      timeout_s: float = 30.0) -> Any:
        """Send a request to the active controller, retrying while there is none (or it moved).
        None when this node itself became the active controller meanwhile: call it directly."""
        from samsa.cluster.channel import ChannelError

        deadline = time.monotonic() + timeout_s
        while True:
            if self.node.active:
                return None
            ch = self.broker.controller_channel()
            if ch is not None:
                try:
                    resp = await call_controller(self.node, ch, api_key, version, body,
                                                 max(deadline - time.monotonic(), 0.1))
                    if resp is not None and top_error(resp) != Err.NOT_CONTROLLER:
                        return resp
                except ChannelError:
                    pass
            if time.monotonic() >= deadline:
                raise ControllerError(Err.REQUEST_TIMED_OUT,
                                      "The active controller could not be reached in time.")
            await asyncio.sleep(RETRY_S)

    async def create_topic(self, name: str, partitions: int, replication: int,
                           configs: dict[str, str | None], validate_only: bool = False,
                           internal: bool = False,
                           assignments: Sequence[tuple[int, Sequence[int]]] | None = None
                           ) -> uuid.UUID:
        while True:
            c = self.local
            if c is not None:
                try:
                    tid: uuid.UUID = await c.create_topic(name, partitions, replication, configs,
                                                          validate_only, assignments)
                    await self.broker.reconciled()
                    return tid
                except NotControllerError:
                    pass
            body = {"topics": [{"name": name, "num_partitions": partitions,
                                "replication_factor": replication,
                                "assignments": [{"partition_index": i, "broker_ids": tuple(b)}
                                                for i, b in assignments or ()],
                                "configs": [{"name": k, "value": v}
                                            for k, v in configs.items()]}],
                    "timeout_ms": 30000, "validate_only": validate_only}
            resp = await self._remote(CREATE_TOPICS, 7, body)
            if resp is not None:
                break
        t = resp.topics[0]
        if t.error_code:
            raise ControllerError(t.error_code, t.error_message or "")
        if not validate_only:
            await self.node.wait_applied(lambda: name in self.image.topics, 5.0)
            await self.broker.reconciled()
        return t.topic_id

    async def delete_topic(self, name: str) -> None:
        while True:
            c = self.local
            if c is not None:
                try:
                    await c.delete_topic(name)
                    await self.broker.reconciled()
                    return
                except NotControllerError:
                    pass
            resp = await self._remote(DELETE_TOPICS, 6, {"topics": [{"name": name}],
                                                         "timeout_ms": 30000})
            if resp is not None:
                break
        r = resp.responses[0]
        if r.error_code:
            raise ControllerError(r.error_code, r.error_message or "")
        await self.node.wait_applied(lambda: name not in self.image.topics, 5.0)
        await self.broker.reconciled()

    async def create_partitions(self, name: str, count: int, validate_only: bool,
                                assignments: Sequence[Sequence[int]] | None = None) -> None:
        while True:
            c = self.local
            if c is not None:
                try:
                    await c.create_partitions(name, count, validate_only, assignments)
                    await self.broker.reconciled()
                    return
                except NotControllerError:
                    pass
            body = {"topics": [{"name": name, "count": count,
                                "assignments": None if assignments is None else
                                [{"broker_ids": tuple(a)} for a in assignments]}],
                    "timeout_ms": 30000, "validate_only": validate_only}
            resp = await self._remote(CREATE_PARTITIONS, 3, body)
            if resp is not None:
                break
        r = resp.results[0]
        if r.error_code:
            raise ControllerError(r.error_code, r.error_message or "")

    async def alter_topic_configs(self, name: str, changes: dict[str, str | None],
                                  validate_only: bool) -> None:
        c = self.local
        if c is None:
            raise ControllerError(Err.NOT_CONTROLLER, "This node is not the active controller.")
        await c.alter_topic_configs(name, changes, validate_only)

    async def alter_broker_configs(self, changes: dict[str, str | None], validate_only: bool,
                                   node: str = "") -> None:
        c = self.local
        if c is None:
            raise ControllerError(Err.NOT_CONTROLLER, "This node is not the active controller.")
        await c.alter_broker_configs(changes, validate_only, node)

    async def allocate_producer_id(self) -> int:
        """One producer id, from blocks the controller hands out (unique cluster-wide)."""
        async with self._pid_lock:
            if self._pid_next >= self._pid_limit:
                first, length = await self._allocate_block()
                self._pid_next, self._pid_limit = first, first + length
            pid = self._pid_next
            self._pid_next += 1
            return pid

    async def _allocate_block(self) -> tuple[int, int]:
        while True:
            epoch = self.broker.lifecycle.broker_epoch
            c = self.local
            if c is not None:
                try:
                    first, length = await c.allocate_producer_ids(self.node.node_id, epoch)
                    return first, length
                except NotControllerError:
                    pass
            resp = await self._remote(ALLOCATE_PRODUCER_IDS, 0,
                                      {"broker_id": self.node.node_id, "broker_epoch": epoch},
                                      PRODUCER_ID_BLOCK_TIMEOUT_S)
            if resp is not None:
                break
        if resp.error_code:
            raise ControllerError(resp.error_code, "producer id block allocation failed")
        return resp.producer_id_start, resp.producer_id_len

    async def alter_partition(self, topic_id: uuid.UUID, partition: int, leader_epoch: int,
                              new_isr: Sequence[tuple[int, int]], leader_recovery_state: int,
                              partition_epoch: int, timeout_s: float = 30.0
                              ) -> tuple[int, PartitionState | None]:
        """This broker, as the partition's leader, asks the active controller for a new ISR
        ((broker id, broker epoch or -1) pairs): AlterPartition v3, or a direct call when this
        node is the active controller. Returns Kafka's error code and, on success, the partition
        as the controller now has it; never raises ControllerError (REQUEST_TIMED_OUT when no
        controller answered in time). NOT_CONTROLLER (no controller, or one behind the
        sender's epochs) is retried until `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while True:
            epoch = self.broker.lifecycle.broker_epoch
            c = self.local
            code: int
            state: PartitionState | None = None
            resp = None
            if c is not None:
                try:
                    code, state = await c.alter_partition(
                        self.node.node_id, epoch, topic_id, partition, leader_epoch, new_isr,
                        leader_recovery_state, partition_epoch)
                except NotControllerError:
                    code = Err.NOT_CONTROLLER
            else:
                body = {"broker_id": self.node.node_id, "broker_epoch": epoch, "topics": [
                    {"topic_id": topic_id, "partitions": [
                        {"partition_index": partition, "leader_epoch": leader_epoch,
                         "new_isr_with_epochs": [{"broker_id": b, "broker_epoch": e}
                                                 for b, e in new_isr],
                         "leader_recovery_state": leader_recovery_state,
                         "partition_epoch": partition_epoch}]}]}
                try:
                    resp = await self._remote(ALTER_PARTITION, 3, body,
                                              max(deadline - time.monotonic(), 0.0))
                except ControllerError as e:
                    return e.code, None
                if resp is None:
                    continue  # this node became the active controller meanwhile
                code = resp.error_code
                if not code:
                    p = resp.topics[0].partitions[0]
                    code = p.error_code
                    if not code:
                        state = PartitionState((), tuple(p.isr),
                                               p.leader_id, p.leader_epoch, p.partition_epoch,
                                               leader_recovery_state=p.leader_recovery_state)
            if code != Err.NOT_CONTROLLER or time.monotonic() >= deadline:
                if state is not None and resp is not None:
                    # the response carries no replica lists: the local image's (it may lag)
                    t = self.image.by_id.get(topic_id)
                    ps = t.partitions.get(partition) if t is not None else None
                    if ps is not None:
                        state.replicas = ps.replicas
                        state.adding_replicas = ps.adding_replicas
                        state.removing_replicas = ps.removing_replicas
                return code, state
            await asyncio.sleep(RETRY_S)
