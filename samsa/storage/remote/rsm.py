"""The remote storage manager interface (KIP-405's RemoteStorageManager) and its value types.

A RemoteStorageManager (RSM) stores the files of closed log segments in some store (a local
directory, S3) and hands them back by byte range. It knows nothing about which segments are live:
that is the remote log metadata manager's job (`metadata.py`), so an RSM must tolerate copies that
were started and never finished (kill -9) and deletes of objects that are already gone.

Every method blocks (file or network I/O): callers run them in worker threads, never on the broker
event loop. The backend is chosen by the broker config `remote.log.storage.manager.class.name`
(Kafka's name; a samsa short name `local` / `s3`, Kafka's LocalTieredStorage class name, or a
`module:Class` / `module.Class` path) and configured with the `rsm.config.*` broker properties
(prefix from `remote.log.storage.manager.impl.prefix`), stripped of the prefix.
"""

from __future__ import annotations

import enum
import importlib
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol, runtime_checkable

# ---- states (Kafka's RemoteLogSegmentState / RemotePartitionDeleteState ids) ---------------


class RemoteLogSegmentState(enum.IntEnum):
    """The life of a remote segment. Valid transitions: STARTED -> FINISHED or DELETE_STARTED
    (a copy that failed or was orphaned), FINISHED -> DELETE_STARTED, DELETE_STARTED ->
    DELETE_FINISHED. Only COPY_SEGMENT_FINISHED segments are ever served to readers."""

    COPY_SEGMENT_STARTED = 0
    COPY_SEGMENT_FINISHED = 1
    DELETE_SEGMENT_STARTED = 2
    DELETE_SEGMENT_FINISHED = 3

    def can_become(self, nxt: RemoteLogSegmentState) -> bool:
        return nxt in _TRANSITIONS[self]


S = RemoteLogSegmentState
_TRANSITIONS: dict[RemoteLogSegmentState, frozenset[RemoteLogSegmentState]] = {
    S.COPY_SEGMENT_STARTED: frozenset({S.COPY_SEGMENT_FINISHED, S.DELETE_SEGMENT_STARTED}),
    S.COPY_SEGMENT_FINISHED: frozenset({S.DELETE_SEGMENT_STARTED}),
    S.DELETE_SEGMENT_STARTED: frozenset({S.DELETE_SEGMENT_FINISHED}),
    S.DELETE_SEGMENT_FINISHED: frozenset(),
}


class RemotePartitionDeleteState(enum.IntEnum):
    """A partition whose remote data is being removed (its topic was deleted, or remote storage
    was turned off with remote.log.delete.on.disable=true)."""

    DELETE_PARTITION_MARKED = 0
    DELETE_PARTITION_STARTED = 1
    DELETE_PARTITION_FINISHED = 2


class IndexType(enum.Enum):
    """The per-segment files copied with the log (Kafka's RemoteStorageManager.IndexType)."""

    OFFSET = "index"
    TIMESTAMP = "timeindex"
    PRODUCER_SNAPSHOT = "snapshot"
    TRANSACTION = "txnindex"
    LEADER_EPOCH = "leader-epoch-checkpoint"


# ---- ids and metadata ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopicIdPartition:
    """A partition named by its topic id too: a topic deleted and created again under the same
    name never sees the old one's remote segments."""

    topic_id: uuid.UUID
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}:{self.topic_id}"


@dataclass(frozen=True, slots=True)
class RemoteLogSegmentId:
    tp: TopicIdPartition
    id: uuid.UUID

    @classmethod
    def generate(cls, tp: TopicIdPartition) -> RemoteLogSegmentId:
        return cls(tp, uuid.uuid4())


@dataclass(frozen=True, slots=True)
class RemoteLogSegmentMetadata:
    """What the metadata topic records about one remote segment. Offsets are inclusive, as in
    Kafka: the segment holds [start_offset, end_offset]. `segment_leader_epochs` maps each leader
    epoch with records in the segment to its first offset there (ascending)."""

    segment_id: RemoteLogSegmentId
    start_offset: int
    end_offset: int
    max_timestamp_ms: int
    broker_id: int
    event_timestamp_ms: int
    segment_size_in_bytes: int
    segment_leader_epochs: tuple[tuple[int, int], ...]
    state: RemoteLogSegmentState = RemoteLogSegmentState.COPY_SEGMENT_STARTED
    custom_metadata: bytes | None = None
    # whether a transaction index was copied (Kafka: the txn index is optional per segment)
    has_txn_index: bool = False

    @property
    def tp(self) -> TopicIdPartition:
        return self.segment_id.tp

    @property
    def id(self) -> uuid.UUID:
        return self.segment_id.id

    def with_update(self, u: RemoteLogSegmentMetadataUpdate) -> RemoteLogSegmentMetadata:
        """The metadata after an update (state, event time, broker, custom metadata)."""
        return replace(self, state=u.state, event_timestamp_ms=u.event_timestamp_ms,
                       broker_id=u.broker_id,
                       custom_metadata=u.custom_metadata if u.custom_metadata is not None
                       else self.custom_metadata)

    def epochs_in(self) -> list[int]:
        return [e for e, _ in self.segment_leader_epochs]


@dataclass(frozen=True, slots=True)
class RemoteLogSegmentMetadataUpdate:
    segment_id: RemoteLogSegmentId
    event_timestamp_ms: int
    state: RemoteLogSegmentState
    broker_id: int
    custom_metadata: bytes | None = None


@dataclass(frozen=True, slots=True)
class RemotePartitionDeleteMetadata:
    tp: TopicIdPartition
    state: RemotePartitionDeleteState
    event_timestamp_ms: int
    broker_id: int


@dataclass(frozen=True, slots=True)
class LogSegmentData:
    """The files of one closed segment to copy. Paths name files the caller keeps in place until
    the copy returns (the RSM reads them in its thread; `part()` reads either form); the offset
    and time indexes may come as bytes (samsa builds them from the segment's in-memory index, in
    the .index / .timeindex file formats); the generated parts are bytes:
    - `transaction_index`: the aborted transactions with records in the segment, entries of
      4 x int64 big-endian (producer id, first offset, last offset, last stable offset) as the
      local aborted index holds them; None when there are none.
    - `leader_epoch_index`: the leader-epoch-checkpoint text truncated to the segment's end.
    - `producer_snapshot`: samsa's producer-state snapshot as of the segment's end offset + 1,
      or None when none was kept (the follower path then replays)."""

    log_segment: Path
    offset_index: Path | bytes
    time_index: Path | bytes
    transaction_index: bytes | None
    producer_snapshot: bytes | None
    leader_epoch_index: bytes

    def part(self, index_type: IndexType) -> bytes | None:
        """The bytes of one index part (None when the segment has none of that type)."""
        v = {IndexType.OFFSET: self.offset_index, IndexType.TIMESTAMP: self.time_index,
             IndexType.TRANSACTION: self.transaction_index,
             IndexType.PRODUCER_SNAPSHOT: self.producer_snapshot,
             IndexType.LEADER_EPOCH: self.leader_epoch_index}[index_type]
        return v.read_bytes() if isinstance(v, Path) else v


class RemoteStorageError(Exception):
    """A store operation failed (unreachable, refused, I/O error): retriable by the caller."""


class RemoteResourceNotFound(RemoteStorageError):
    """The segment (or one of its files) is not in the store."""


@dataclass(frozen=True, slots=True)
class RemoteObject:
    """One segment found by listing the store (orphan cleanup): its id and its files' total
    size. `modified_ms` lets cleanup spare a copy that may still be in progress."""

    segment_id: RemoteLogSegmentId
    size: int
    modified_ms: int
    files: tuple[str, ...] = field(default=())


@runtime_checkable
class RemoteStorageManager(Protocol):
    """KIP-405's RemoteStorageManager, blocking. All methods may raise RemoteStorageError."""

    def configure(self, configs: Mapping[str, str]) -> None:
        """The `rsm.config.*` properties without the prefix, plus `broker.id` and `log.dirs`."""

    def copy_log_segment_data(self, meta: RemoteLogSegmentMetadata,
                              data: LogSegmentData) -> bytes | None:
        """Copy every file of the segment; returns custom metadata (or None). Idempotent: a copy
        of the same segment id again replaces whatever a failed attempt left. When it returns,
        every file is durable in the store; when it raises, nothing is assumed (the caller
        deletes what may be there)."""
        ...

    def fetch_log_segment(self, meta: RemoteLogSegmentMetadata, start_position: int,
                          end_position: int | None = None) -> bytes:
        """Bytes of the segment's log from `start_position` to `end_position` INCLUSIVE (Kafka's
        convention), or to the end when None. Short at the end of the object."""
        ...

    def fetch_index(self, meta: RemoteLogSegmentMetadata, index_type: IndexType) -> bytes:
        """The whole index file of that type; RemoteResourceNotFound if the segment has none
        (TRANSACTION and PRODUCER_SNAPSHOT are optional)."""
        ...

    def delete_log_segment_data(self, meta: RemoteLogSegmentMetadata) -> None:
        """Delete every file of the segment. Deleting what is not there is not an error."""
        ...

    def list_segments(self, tp: TopicIdPartition | None = None) -> Iterable[RemoteObject]:
        """Every segment the store holds (of one partition, or all): for orphan cleanup."""
        ...

    def close(self) -> None:
        ...


# ---- backend selection -----------------------------------------------------------------------

SHORT_NAMES = {
    "local": "samsa.storage.remote.local_store:LocalDirectoryRemoteStorageManager",
    "s3": "samsa.storage.remote.s3_store:S3RemoteStorageManager",
    # Kafka's test backend is a local directory too
    "org.apache.kafka.server.log.remote.storage.LocalTieredStorage":
        "samsa.storage.remote.local_store:LocalDirectoryRemoteStorageManager",
}
DEFAULT_CLASS = "local"
DEFAULT_PREFIX = "rsm.config."


def load_class(name: str) -> type:
    """The class a `remote.log.storage.manager.class.name` value names."""
    target = SHORT_NAMES.get(name.strip() or DEFAULT_CLASS, name.strip())
    if ":" in target:
        mod, _, cls = target.partition(":")
    else:
        mod, _, cls = target.rpartition(".")
    if not mod or not cls:
        raise ValueError(f"remote.log.storage.manager.class.name: cannot load {name!r}")
    try:
        return getattr(importlib.import_module(mod), cls)  # type: ignore[no-any-return]
    except (ImportError, AttributeError) as e:
        raise ValueError(f"remote.log.storage.manager.class.name: cannot load {name!r}: {e}") \
            from e


def rsm_configs(props: Mapping[str, str], prefix: str = DEFAULT_PREFIX) -> dict[str, str]:
    """The `<prefix>*` properties with the prefix stripped."""
    return {k[len(prefix):]: v for k, v in props.items() if k.startswith(prefix)}


def create_rsm(class_name: str | None, props: Mapping[str, str],
               prefix: str = DEFAULT_PREFIX, extra: Mapping[str, str] | None = None
               ) -> RemoteStorageManager:
    """Instantiate and configure the backend named by `class_name` (default: local)."""
    cls = load_class(class_name or DEFAULT_CLASS)
    rsm = cls()
    cfg = rsm_configs(props, prefix)
    if extra:
        for k, v in extra.items():
            cfg.setdefault(k, v)
    rsm.configure(cfg)
    return rsm  # type: ignore[no-any-return]
