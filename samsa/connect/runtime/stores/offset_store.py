"""Source connectors' offsets, kept as Kafka Connect keeps them: key `["<connector>", {partition}]`
and value `{offset}` as schemaless JSON, a null value resets the partition. Standalone workers
keep them in `offset.storage.file.filename`, distributed ones in `offset.storage.topic` (compacted,
`offset.storage.partitions`, records placed by murmur2 of the key as Kafka's default partitioner
does, so one source partition's offsets always share a topic partition and stay in order).

Stores are keyed by the serialized key. Lookups compare keys by their canonical JSON (sorted
object keys), so a partition dict built in another key order still finds its offset; writes
reuse the key bytes the topic already holds, so compaction replaces them.

OffsetStorageWriter buffers a task's offsets and flushes them in snapshots (Kafka's semantics:
begin_flush() snapshots, do_flush() writes, cancel_flush() puts the snapshot back under newer
offsets, one flush at a time); OffsetStorageReaderImpl reads one connector's offsets."""

from __future__ import annotations

import base64
import contextlib
import logging
import os
import tempfile
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from ... import errors
from . import codec, javaser
from .kafka_log import DEFAULT_TIMEOUT_S, KafkaBasedLog, LogRecord, SendError

log = logging.getLogger("samsa.connect.offset_store")

OffsetCallback = Callable[[BaseException | None], None]


# ---- keys and values ----------------------------------------------------------------------------
def validate_format(data: Any) -> None:
    """Kafka's OffsetUtils.validateFormat: a map (or null) of string keys to primitive values."""
    if data is None:
        return
    if not isinstance(data, dict):
        raise errors.DataException("Offsets must be specified as a Map")
    for k, v in data.items():
        if not isinstance(k, str):
            raise errors.DataException("Offsets may only use String keys")
        if v is None:
            continue
        if not isinstance(v, str | int | float | bool | bytes):
            raise errors.DataException(
                "Offsets may only contain primitive types as values, but field "
                f"{k} contains {type(v).__name__}")


def offset_key(connector: str, partition: dict[str, Any]) -> bytes:
    """The record key Kafka Connect writes for a connector's source partition."""
    return codec.dumps([connector, partition])


def partition_key(partition: dict[str, Any]) -> str:
    """The key `OffsetStorageReader.offsets()` returns each partition's offset under: its
    canonical JSON (Python dicts cannot be dict keys)."""
    return codec.canonical(partition).decode("utf-8")


def parse_offset_key(key: bytes | None) -> tuple[str, dict[str, Any]] | None:
    """(connector, partition) of an offsets record key, None for a key of another shape (Kafka
    ignores those with a warning)."""
    if key is None:
        return None
    try:
        k = codec.loads(key)
    except ValueError:
        return None
    if (not isinstance(k, list) or len(k) != 2 or not isinstance(k[0], str)
            or not isinstance(k[1], dict)):
        return None
    return k[0], k[1]


def _canon(key: bytes) -> bytes:
    try:
        return codec.canonical(codec.loads(key))
    except ValueError:
        return key


# ---- the stores ---------------------------------------------------------------------------------
class OffsetBackingStore(ABC):
    """Serialized key -> serialized offset (None: no offset), plus each connector's partitions."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        # canonical key -> (key as written, value)
        self._data: dict[bytes, tuple[bytes, bytes]] = {}
        # connector -> canonical partition JSON -> partition
        self._partitions: dict[str, dict[bytes, dict[str, Any]]] = {}

    @abstractmethod
    def start(self) -> None: ...

    @abstractmethod
    def stop(self) -> None: ...

    def get(self, keys: Collection[bytes]) -> dict[bytes, bytes | None]:
        """The current offsets of `keys` (each key maps to None when it has no offset)."""
        self._refresh()
        with self._lock:
            out: dict[bytes, bytes | None] = {}
            for k in keys:
                hit = self._data.get(_canon(k))
                out[k] = hit[1] if hit is not None else None
            return out

    @abstractmethod
    def set(self, values: dict[bytes, bytes | None],
            callback: OffsetCallback | None = None) -> Future[None]:
        """Write the offsets (None: reset); the future (and callback) completes when durable."""

    def _refresh(self) -> None:  # noqa: B027 - optional hook
        """Bring the view up to date before a read (the Kafka store reads to the end)."""

    def connector_partitions(self, connector: str) -> list[dict[str, Any]]:
        """Every source partition the connector has an offset for (GET .../offsets)."""
        self._refresh()
        with self._lock:
            return [dict(p) for p in self._partitions.get(connector, {}).values()]

    def _written_key(self, key: bytes) -> bytes:
        """The key bytes to write: the spelling already stored for an equal key, if any."""
        with self._lock:
            hit = self._data.get(_canon(key))
            return hit[0] if hit is not None else key

    def _apply(self, key: bytes | None, value: bytes | None) -> None:
        if key is None:
            log.warning("ignoring an offset record without a key")
            return
        canon = _canon(key)
        parsed = parse_offset_key(key)
        with self._lock:
            if value is None:
                self._data.pop(canon, None)
            else:
                self._data[canon] = (key, value)
            if parsed is None:
                log.warning("offset key %r is not [connector, partition]", key[:200])
                return
            conn, part = parsed
            parts = self._partitions.setdefault(conn, {})
            pkey = codec.canonical(part)
            if value is None:
                parts.pop(pkey, None)
            else:
                parts[pkey] = part


class MemoryOffsetBackingStore(OffsetBackingStore):
    """Offsets in memory only (tests, and the base of the file store)."""

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def set(self, values: dict[bytes, bytes | None],
            callback: OffsetCallback | None = None) -> Future[None]:
        fut: Future[None] = Future()
        try:
            with self._lock:
                for k, v in values.items():
                    self._apply(self._written_key(k), v)
                self._save()
        except BaseException as e:  # noqa: BLE001 - reported through the future and callback
            fut.set_exception(e)
            if callback is not None:
                callback(e)
            return fut
        fut.set_result(None)
        if callback is not None:
            callback(None)
        return fut

    def _save(self) -> None:
        """Persist after a write (the file store)."""


class FileOffsetBackingStore(MemoryOffsetBackingStore):
    """`offset.storage.file.filename`, in Kafka Connect's own format (a Java-serialized
    HashMap<byte[], byte[]>, see javaser.py), so the file moves between Kafka Connect and Samsa.
    The whole map is rewritten on each write through a temporary file that is fsynced and renamed
    over the old one: a crash leaves the old or the new map, never a torn one (Kafka rewrites the
    file in place)."""

    def __init__(self, filename: str | os.PathLike[str]) -> None:
        super().__init__()
        if not str(filename):
            raise errors.ConfigException("offset.storage.file.filename", filename,
                                         "must name a file")
        self.path = Path(filename)

    def start(self) -> None:
        self._load()

    def _load(self) -> None:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return  # a new worker
        except OSError as e:
            raise errors.ConnectException(f"cannot read offsets from {self.path}: {e}") from None
        if not data:
            return  # Kafka reads an empty file as no offsets
        try:
            entries = javaser.load_byte_map(data)
        except javaser.JavaSerError as e:
            raise errors.ConnectException(f"cannot read offsets from {self.path}: {e}") from None
        with self._lock:
            for key, value in entries:
                self._apply(key, value)

    def _save(self) -> None:
        with self._lock:
            body = javaser.dump_byte_map(list(self._data.values()))
        d = self.path.parent
        d.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=d)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(body)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        dfd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(dfd)  # the rename itself is durable
        finally:
            os.close(dfd)


class KafkaOffsetBackingStore(OffsetBackingStore):
    """`offset.storage.topic`: records placed by murmur2 of the key; the view is rebuilt by
    reading the topic, and each `get` first reads to its end."""

    def __init__(self, topic: str, client: dict[str, Any], *, partitions: int = 25,
                 replication_factor: int = 3, topic_settings: dict[str, str] | None = None,
                 client_id: str = "connect-offsets", read_committed: bool = False,
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        super().__init__()
        if not topic.strip():
            raise errors.ConfigException("Offset storage topic must be specified")
        self.topic = topic
        self.timeout_s = timeout_s
        self.kafka_log = KafkaBasedLog(
            topic, client, self._consumed, partitions=partitions,
            replication_factor=replication_factor, topic_settings=topic_settings,
            client_id=client_id, read_committed=read_committed, timeout_s=timeout_s,
            purpose="source connector offsets", topic_property="offset.storage.topic")

    @classmethod
    def from_worker_config(cls, props: dict[str, str], client: dict[str, Any]) -> KafkaOffsetBackingStore:
        group = props.get("group.id", "connect-cluster")
        own = {"topic", "replication.factor", "partitions", "file.filename"}
        settings = {k[15:]: v for k, v in props.items()
                    if k.startswith("offset.storage.") and k[15:] not in own}
        return cls(props.get("offset.storage.topic", ""), client,
                   partitions=int(props.get("offset.storage.partitions", "25")),
                   replication_factor=int(props.get("offset.storage.replication.factor", "3")),
                   topic_settings=settings,
                   client_id=f"{props.get('client.id', 'connect-cluster-' + group)}-offsets",
                   read_committed=props.get("exactly.once.source.support", "") == "enabled")

    def _consumed(self, rec: LogRecord) -> None:
        self._apply(rec.key, rec.value)

    def offset_record(self, connector: str, partition: dict[str, Any],
                      offset: dict[str, Any] | None) -> tuple[bytes, bytes | None]:
        """The (key, value) of an offsets record, for a task producing it in its own transaction
        (exactly-once source); place it with `offset_partition`."""
        validate_format(partition)
        validate_format(offset)
        key = self._written_key(offset_key(connector, partition))
        return key, None if offset is None else codec.dumps(offset)

    def offset_partition(self, key: bytes) -> int:
        """The partition Kafka's default partitioner gives the key (librdkafka's default,
        consistent_random, would not: set partitioner=murmur2_random or pass this)."""
        return codec.default_partition(key, self.kafka_log.partition_count() or 1)

    def start(self) -> None:
        self.kafka_log.start()

    def stop(self) -> None:
        self.kafka_log.stop()

    def _refresh(self) -> None:
        self.kafka_log.read_to_end(self.timeout_s)

    def set(self, values: dict[bytes, bytes | None],
            callback: OffsetCallback | None = None) -> Future[None]:
        fut: Future[None] = Future()
        pending = [len(values)]
        lock = threading.Lock()

        def finish(err: BaseException | None) -> None:
            if fut.done():
                return
            if err is None:
                fut.set_result(None)
            else:
                fut.set_exception(err)
            if callback is not None:
                callback(err)

        def done(err: SendError | None, _rec: LogRecord | None) -> None:
            with lock:
                pending[0] -= 1
                left = pending[0]
            if err is not None:
                finish(err)
            elif left == 0:
                finish(None)

        if not values:
            finish(None)
            return fut
        for k, v in values.items():
            self.kafka_log.send(self._written_key(k), v, done)
        self.kafka_log.flush(0)  # hand the batch to the network now; deliveries come later
        return fut


def offset_store_for(props: dict[str, str], client: dict[str, Any],
                     distributed: bool) -> OffsetBackingStore:
    """The worker's offsets store: the topic (distributed) or `offset.storage.file.filename`."""
    if distributed:
        return KafkaOffsetBackingStore.from_worker_config(props, client)
    return FileOffsetBackingStore(props.get("offset.storage.file.filename", ""))


# ---- reader and writer ------------------------------------------------------------------------
class OffsetStorageReaderImpl:
    """samsa.connect.api.OffsetStorageReader for one connector (Kafka's namespace)."""

    def __init__(self, store: OffsetBackingStore, namespace: str) -> None:
        self.store = store
        self.namespace = namespace
        self._closed = False

    def offset(self, partition: dict[str, Any]) -> dict[str, Any] | None:
        return self.offsets([partition]).get(partition_key(partition))

    def offsets(self, partitions: Sequence[dict[str, Any]]) -> dict[Any, dict[str, Any] | None]:
        """{partition_key(partition): offset or None} for each partition asked."""
        if self._closed:
            raise errors.ConnectException("Offset reader is closed. This is likely because the "
                                          "task has already been scheduled to stop but has "
                                          "taken longer than the graceful shutdown period to do so.")
        keys: dict[bytes, dict[str, Any]] = {}
        for p in partitions:
            validate_format(p)
            keys[offset_key(self.namespace, p)] = p
        try:
            raw = self.store.get(list(keys))
        except errors.ConnectException:
            raise
        except Exception as e:
            raise errors.ConnectException(f"Failed to fetch offsets: {e}") from e
        out: dict[Any, dict[str, Any] | None] = {}
        for k, p in keys.items():
            value = raw.get(k)
            try:
                offset = codec.loads(value)
                validate_format(offset)
            except (ValueError, errors.DataException) as e:
                log.error("CRITICAL: failed to deserialize offset %r of %r: %s", value, p, e)
                offset = None
            out[partition_key(p)] = offset
        return out

    def close(self) -> None:
        self._closed = True


class OffsetStorageWriter:
    """Buffers a task's offsets and writes them in flushes (Kafka's OffsetStorageWriter)."""

    def __init__(self, store: OffsetBackingStore, namespace: str) -> None:
        self.store = store
        self.namespace = namespace
        self._lock = threading.Lock()
        self._data: dict[bytes, tuple[dict[str, Any], dict[str, Any] | None]] = {}
        self._to_flush: dict[bytes, tuple[dict[str, Any], dict[str, Any] | None]] | None = None
        self._flush_id = 0

    def offset(self, partition: dict[str, Any], offset: dict[str, Any] | None) -> None:
        """Remember the partition's latest offset (None: reset it) until the next flush."""
        with self._lock:
            self._data[codec.canonical(partition)] = (partition, offset)

    def will_flush(self) -> bool:
        with self._lock:
            return self._to_flush is not None or bool(self._data)

    def begin_flush(self) -> bool:
        """Snapshot the buffered offsets for do_flush(); False when there is nothing to flush.
        ConnectException if a flush is already in progress."""
        with self._lock:
            if self._to_flush is not None:
                log.error("Invalid call to OffsetStorageWriter flush() while already flushing, "
                          "the framework should not allow this")
                raise errors.ConnectException("OffsetStorageWriter is already flushing")
            if not self._data:
                return False
            self._to_flush, self._data = self._data, {}
            return True

    def do_flush(self, callback: OffsetCallback | None = None) -> Future[None] | None:
        """Write the snapshot. None (after calling back with the error) when it cannot be
        serialized; otherwise a future that completes when the store has it."""
        with self._lock:
            flush_id = self._flush_id
            snapshot = dict(self._to_flush or {})
        try:
            values: dict[bytes, bytes | None] = {}
            for partition, offset in snapshot.values():
                validate_format(partition)
                validate_format(offset)
                values[offset_key(self.namespace, partition)] = (
                    None if offset is None else codec.dumps(offset))
        except Exception as e:
            log.error("CRITICAL: Failed to serialize offset data, making it impossible to commit "
                      "offsets under namespace %s: %s", self.namespace, e)
            if callback is not None:
                callback(e)
            return None

        def finished(err: BaseException | None) -> None:
            if self._finish_write(flush_id, err) and callback is not None:
                callback(err)

        return self.store.set(values, finished)

    def do_flush_sync(self, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        """do_flush() and wait; on failure or timeout the snapshot is put back (cancel_flush)
        and ConnectException raised."""
        fut = self.do_flush()
        if fut is None:
            raise errors.ConnectException(f"cannot serialize the offsets of {self.namespace}")
        try:
            fut.result(timeout_s)
        except TimeoutError:
            self.cancel_flush()
            raise errors.ConnectException(
                f"timed out flushing the offsets of {self.namespace}") from None
        except errors.ConnectException:
            raise
        except Exception as e:
            raise errors.ConnectException(
                f"failed to flush the offsets of {self.namespace}: {e}") from e

    def cancel_flush(self) -> None:
        """Put the snapshot back (offsets recorded since then win) and accept a new flush."""
        with self._lock:
            self._cancel()

    def _cancel(self) -> None:
        if self._to_flush is not None:
            self._to_flush.update(self._data)
            self._data, self._to_flush = self._to_flush, None
            self._flush_id += 1

    def _finish_write(self, flush_id: int, err: BaseException | None) -> bool:
        """True if this completes the current flush (a cancelled flush's late answer is ignored)."""
        with self._lock:
            if flush_id != self._flush_id:
                return False
            if err is not None:
                self._cancel()
            else:
                self._flush_id += 1
                self._to_flush = None
            return True


# ---- REST offsets helpers (KIP-875) -------------------------------------------------------------
def connector_offsets(store: OffsetBackingStore, connector: str) -> list[dict[str, Any]]:
    """[{"partition": {...}, "offset": {...}}] for every partition the connector has an offset for
    (GET /connectors/{name}/offsets of a source connector)."""
    parts = store.connector_partitions(connector)
    reader = OffsetStorageReaderImpl(store, connector)
    got = reader.offsets(parts)
    out = []
    for p in parts:
        off = got.get(partition_key(p))
        if off is not None:
            out.append({"partition": p, "offset": off})
    return out


def write_offsets(store: OffsetBackingStore, connector: str,
                  offsets: Iterable[tuple[dict[str, Any], dict[str, Any] | None]],
                  timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
    """Write new offsets or tombstones (None) for the connector's partitions and wait (PATCH and
    DELETE /connectors/{name}/offsets)."""
    values: dict[bytes, bytes | None] = {}
    for partition, offset in offsets:
        validate_format(partition)
        validate_format(offset)
        values[offset_key(connector, partition)] = None if offset is None else codec.dumps(offset)
    try:
        store.set(values).result(timeout_s)
    except TimeoutError:
        raise errors.ConnectException(f"timed out writing offsets of {connector}") from None


def reset_offsets(store: OffsetBackingStore, connector: str,
                  timeout_s: float = DEFAULT_TIMEOUT_S) -> int:
    """Tombstones for every partition of the connector; returns how many were written."""
    parts = store.connector_partitions(connector)
    write_offsets(store, connector, [(p, None) for p in parts], timeout_s)
    return len(parts)


def decode_bytes_offset(value: str) -> bytes:
    """A bytes offset value comes back as the base64 text JsonConverter wrote."""
    return base64.b64decode(value)
