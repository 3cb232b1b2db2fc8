"""The metadata image: what every node knows about the cluster, built by applying committed
metadata records in offset order. A restart rebuilds it from the latest snapshot plus the log.

The image is only ever changed by `apply`, on every node alike (controllers and brokers), so all
nodes that applied the same offsets hold equal images.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from .records import Record

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


@dataclass(slots=True)
class BrokerRegistration:
    broker_id: int
    incarnation_id: uuid.UUID
    broker_epoch: int
    endpoints: dict[str, tuple[str, int]]  # listener name -> (host, port)
    rack: str | None = None
    fenced: bool = True
    in_controlled_shutdown: bool = False


@dataclass(slots=True)
class PartitionState:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int  # -1: offline
    leader_epoch: int = 0
    partition_epoch: int = 0


@dataclass(slots=True)
class TopicImage:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionState] = field(default_factory=dict)
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def internal(self) -> bool:
        return self.name in INTERNAL_TOPICS

    @property
    def count(self) -> int:
        """Number of partitions."""
        return len(self.partitions)


@dataclass(slots=True)
class MetadataImage:
    cluster_id: str = ""
    offset: int = -1  # offset of the last record applied
    brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    topics: dict[str, TopicImage] = field(default_factory=dict)
    by_id: dict[uuid.UUID, TopicImage] = field(default_factory=dict)
    cluster_configs: dict[str, str] = field(default_factory=dict)  # ConfigRecord broker ""
    node_configs: dict[int, dict[str, str]] = field(default_factory=dict)  # broker "<id>"
    features: dict[str, int] = field(default_factory=dict)
    next_producer_id: int = 0

    def apply(self, record: Record, offset: int = -1) -> None:
        """Apply one committed record (every record type of `records`)."""
        raise NotImplementedError  # metadata helper

    def to_records(self) -> list[Record]:
        """Records that rebuild this image from empty (a snapshot's content)."""
        raise NotImplementedError  # metadata helper

    def live_brokers(self) -> list[BrokerRegistration]:
        """Unfenced brokers, by id."""
        return [b for _, b in sorted(self.brokers.items()) if not b.fenced]

    def broker_configs_for_topics(self, node_id: int) -> dict[str, str]:
        """Dynamic broker settings as topic config names: the node's own over the cluster-wide."""
        raise NotImplementedError  # metadata helper
