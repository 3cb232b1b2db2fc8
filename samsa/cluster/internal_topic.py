"""Internal topics (`__consumer_offsets`, later `__transaction_state`): created on first use with
Kafka's settings, appended to directly by coordinators, replayed at start."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

from samsa.protocol.batch import read_header
from samsa.protocol.errors import Err
from samsa.protocol.records import control_marker, decode_batch, encode_batch, iter_batches
from samsa.storage.log import PartitionLog
from samsa.storage.manager import LogManager

from .controller import ControllerError


def java_string_hash(s: str) -> int:
    """Java's String.hashCode (UTF-16 code units), used by Kafka to place group ids."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(key: str, partitions: int) -> int:
    """Kafka's Utils.abs(key.hashCode) % partitions (abs maps MIN_VALUE to 0)."""
    h = java_string_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


class ReplicationError(Exception):
    """A coordinator write that did not reach the ISR (or a partition no longer led here)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class InternalTopic:
    def __init__(self, controller: Any, logs: LogManager, name: str, partitions: int,
                 configs: dict[str, str], replication: int = -1) -> None:
        self.controller = controller
        self.logs = logs
        self.name = name
        self.partitions = partitions
        self.configs = configs
        self.replication = replication
        self._lock = asyncio.Lock()
        # waits until the broker has opened the logs the image gives it (set by the broker)
        self.wait_local: Callable[[], Awaitable[None]] | None = None
        # the log of a partition this broker leads, None otherwise (set by the broker; without
        # it, any local log)
        self.leader_log: Callable[[str, int], PartitionLog | None] | None = None
        # waits until a write up to an end offset is replicated to the ISR: an error code
        self.replicated: Callable[[PartitionLog, int], Awaitable[int]] | None = None

    @property
    def exists(self) -> bool:
        return self.name in self.controller.image.topics

    async def ensure(self) -> None:
        """Create the topic on first use (through the active controller); serialised so that
        nobody sees it half-created. The broker opens the logs of the partitions it hosts when
        the records are applied."""
        if self.exists:
            self.partitions = self.controller.image.topics[self.name].count
            return
        async with self._lock:
            if not self.exists:
                try:
                    await self.controller.create_topic(self.name, self.partitions, self.replication,
                                                       dict(self.configs), internal=True)
                except ControllerError as e:
                    if e.code != 36:
                        raise
            t = self.controller.image.topics.get(self.name)
            if t is not None:
                self.partitions = t.count
            await self.local_ready()

    async def local_ready(self, timeout_s: float = 10.0) -> None:
        """Until the broker has opened the local logs of what the image holds (bounded)."""
        if self.wait_local is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wait_local(), timeout_s)

    def count(self) -> int:
        """The partition count every broker agrees on: the image's once the topic exists."""
        t = self.controller.image.topics.get(self.name)
        return t.count if t is not None else self.partitions

    def leader_of(self, key: str) -> int:
        """The broker leading the key's partition (the key's coordinator); -1 if none or the
        topic does not exist yet."""
        t = self.controller.image.topics.get(self.name)
        if t is None:
            return -1
        st = t.partitions.get(partition_for(key, t.count))
        return -1 if st is None else st.leader

    def leader_epoch_of(self, key: str) -> int:
        """The leader epoch of the key's partition (0 if unknown): a transaction coordinator's
        epoch, which partition leaders use to fence markers from a coordinator since replaced."""
        t = self.controller.image.topics.get(self.name)
        st = None if t is None else t.partitions.get(partition_for(key, t.count))
        return 0 if st is None else max(0, st.leader_epoch)

    def owns(self, key: str) -> bool:
        """This broker coordinates `key`: it leads the key's partition and holds its log."""
        if self.leader_of(key) != self.controller.node.node_id:
            return False
        return self.hosted(partition_for(key, self.count()))

    def hosted(self, partition: int) -> bool:
        """This broker leads the partition and holds its log."""
        return self._leader_log(partition) is not None

    def _leader_log(self, partition: int) -> PartitionLog | None:
        if self.leader_log is not None:
            return self.leader_log(self.name, partition)
        return self.logs.get(self.name, partition)

    def partition_of(self, key: str) -> int:
        return partition_for(key, self.count())

    def log(self, partition: int) -> PartitionLog:
        lg = self._leader_log(partition)
        if lg is None:
            raise ReplicationError(Err.NOT_LEADER_OR_FOLLOWER,
                                   f"{self.name}-{partition} is not led by this broker")
        return lg

    async def append(self, partition: int, records: list[tuple[bytes, bytes | None]],
                     producer_id: int = -1, producer_epoch: int = -1,
                     transactional: bool = False) -> int:
        """Append keyed records as one batch; returns its base offset once the flush policy is
        met (so a coordinator answers only after the write is as durable as any produce)."""
        await self.ensure()
        lg = self.log(partition)
        now = int(time.time() * 1000)
        batch = encode_batch([(k, v, [], now) for k, v in records], producer_id=producer_id,
                             producer_epoch=producer_epoch,
                             attributes_extra=0x10 if transactional else 0)
        base, _ = lg.append(bytearray(batch), now, lg.leader_epoch)
        end = lg.end_offset
        if lg.flush_due:
            await lg.flush()
        if self.replicated is not None:
            code = await self.replicated(lg, end)
            if code:
                raise ReplicationError(code, f"{self.name}-{partition}: write at {base} not "
                                       f"replicated: {Err.name_of(code)}")
        return base

    def replay(self, partitions: set[int] | None = None) -> Iterator[ReplayItem]:
        """Every record in offset order, partition by partition (all hosted ones, or those in
        `partitions`), with its batch's producer id, transactional flag and, for control batches,
        the marker type (0 abort, 1 commit)."""
        if not self.exists:
            return
        self.partitions = self.controller.image.topics[self.name].count
        for p in range(self.partitions):
            if partitions is not None and p not in partitions:
                continue
            lg = self.logs.get(self.name, p)
            if lg is None:
                continue
            off = lg.log_start_offset
            while off < lg.end_offset:
                data = lg.read(off, 4 << 20)
                if not data:
                    break
                progressed = False
                for pos, size in iter_batches(data):
                    h = read_header(data, pos)
                    if h.last_offset < off:
                        continue
                    if h.is_control:
                        marker = control_marker(data[pos:pos + size])
                        if marker is not None:
                            yield ReplayItem(None, None, h.producer_id, True, marker[0])
                    else:
                        for r in decode_batch(data, pos):
                            if r.offset >= off:
                                yield ReplayItem(r.key, r.value, h.producer_id,
                                                 h.is_transactional, None)
                    off = h.last_offset + 1
                    progressed = True
                if not progressed:
                    break

    def replay_values(self, partitions: set[int] | None = None
                      ) -> Iterator[tuple[bytes, bytes | None]]:
        """(key, value) of every non-transactional keyed record."""
        for item in self.replay(partitions):
            if item.key is not None and not item.transactional:
                yield item.key, item.value


@dataclass(frozen=True, slots=True)
class ReplayItem:
    key: bytes | None
    value: bytes | None
    producer_id: int
    transactional: bool
    marker: int | None
