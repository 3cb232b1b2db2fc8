"""Which broker coordinates a group or transactional id: the leader of the key's partition of the
internal topic (`__consumer_offsets`, `__transaction_state`). A coordinator answers only for the
keys of partitions this broker leads, and replays a partition's records the first time it needs
them (partitions gained after start: an internal topic created later, by any broker)."""

from __future__ import annotations

from typing import Protocol

from samsa.cluster.controller import ControllerError
from samsa.cluster.internal_topic import InternalTopic
from samsa.protocol.errors import Err


class Coordinator(Protocol):
    topic: InternalTopic
    loaded: set[int]

    def load(self, partitions: set[int] | None = None) -> None: ...


async def owner_error(coord: Coordinator, key: str) -> int:
    """0 when this broker coordinates `key` (its state loaded); NOT_COORDINATOR when it does not
    (another broker leads the partition, or none does); COORDINATOR_NOT_AVAILABLE when the
    internal topic cannot be created."""
    topic = coord.topic
    if not topic.exists:
        try:
            await topic.ensure()
        except ControllerError:
            return Err.COORDINATOR_NOT_AVAILABLE
    if not topic.owns(key) and topic.leader_of(key) == topic.controller.node.node_id:
        await topic.local_ready()  # the image gave this broker the partition: its log is opening
        if not topic.owns(key):
            return Err.COORDINATOR_LOAD_IN_PROGRESS
    if not topic.owns(key):
        return Err.NOT_COORDINATOR  # as Kafka: the client looks the coordinator up again
    p = topic.partition_of(key)
    if p not in coord.loaded:
        coord.load({p})
    return 0


def append_error(code: int) -> int:
    """What a client is told when a coordinator's write to its internal topic did not reach the
    ISR (Kafka's mapping in the group and transaction state managers): NOT_COORDINATOR when the
    partition's leadership moved, COORDINATOR_NOT_AVAILABLE when it may succeed on a retry."""
    if code in (Err.NOT_LEADER_OR_FOLLOWER, Err.KAFKA_STORAGE_ERROR):
        return Err.NOT_COORDINATOR
    if code in (Err.UNKNOWN_TOPIC_OR_PARTITION, Err.NOT_ENOUGH_REPLICAS,
                Err.NOT_ENOUGH_REPLICAS_AFTER_APPEND, Err.REQUEST_TIMED_OUT):
        return Err.COORDINATOR_NOT_AVAILABLE
    return Err.UNKNOWN_SERVER_ERROR
