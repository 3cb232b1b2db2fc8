"""The worker's view of the source offsets store: one reader and one writer per connector, the
REST offsets operations, and (exactly-once) how a task writes offsets in its own transaction."""

from __future__ import annotations

from typing import Any

from .stores.offset_store import (
    KafkaOffsetBackingStore,
    OffsetBackingStore,
    OffsetStorageReaderImpl,
    OffsetStorageWriter,
    connector_offsets,
    offset_store_for,
    write_offsets,
)
from .worker_config import WorkerConfig


class _Writer:
    """OffsetStorageWriter with the blocking flush the source task runner calls."""

    def __init__(self, writer: OffsetStorageWriter) -> None:
        self.w = writer

    def offset(self, partition: dict[str, Any], offset: dict[str, Any] | None) -> None:
        self.w.offset(partition, offset)

    def begin_flush(self) -> bool:
        return self.w.begin_flush()

    def do_flush(self, timeout_s: float) -> None:
        self.w.do_flush_sync(timeout_s)

    def cancel_flush(self) -> None:
        self.w.cancel_flush()


class OffsetsAccess:
    def __init__(self, store: OffsetBackingStore) -> None:
        self.store = store
        self._started = False

    def start(self) -> None:
        if not self._started:
            self.store.start()
            self._started = True

    def stop(self) -> None:
        if self._started:
            self.store.stop()
            self._started = False

    def refresh(self) -> None:
        self.store.refresh()

    def reader(self, connector: str) -> OffsetStorageReaderImpl:
        return OffsetStorageReaderImpl(self.store, connector)

    def writer(self, connector: str) -> _Writer:
        return _Writer(OffsetStorageWriter(self.store, connector))

    def transactional(self) -> KafkaOffsetBackingStore | None:
        return self.store if isinstance(self.store, KafkaOffsetBackingStore) else None

    def all_offsets(self, connector: str) -> list[dict[str, Any]]:
        return connector_offsets(self.store, connector)

    def write(self, connector: str,
              entries: list[tuple[dict[str, Any], dict[str, Any] | None]]) -> None:
        write_offsets(self.store, connector, entries)


def offsets_for(config: WorkerConfig) -> OffsetsAccess:
    props = {k: str(v) for k, v in config.originals.items()}
    client = config.admin_client()
    return OffsetsAccess(offset_store_for(props, client, config.distributed))
