"""Internal topics (`__consumer_offsets`, later `__transaction_state`): created on first use with
Kafka's settings, appended to directly by coordinators, replayed at start."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

from samsa.protocol.records import decode_batch, encode_batch, iter_batches
from samsa.storage.log import PartitionLog
from samsa.storage.manager import LogManager

from .controller import Controller, ControllerError


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


class InternalTopic:
    def __init__(self, controller: Controller, logs: LogManager, name: str, partitions: int,
                 configs: dict[str, str]) -> None:
        self.controller = controller
        self.logs = logs
        self.name = name
        self.partitions = partitions
        self.configs = configs
        self._lock = asyncio.Lock()

    @property
    def exists(self) -> bool:
        return self.name in self.controller.image.topics

    async def ensure(self) -> None:
        """Create the topic on first use; serialised so that nobody sees it half-created."""
        if self.exists and self.logs.get(self.name, self.partitions - 1) is not None:
            return
        async with self._lock:
            if not self.exists:
                try:
                    await self.controller.create_topic(self.name, self.partitions, 1,
                                                       dict(self.configs), internal=True)
                except ControllerError as e:
                    if e.code != 36:
                        raise
            self.partitions = self.controller.image.topics[self.name].partitions
            cfg = self.controller.log_config(self.name)
            for p in range(self.partitions):  # logs missing after an interrupted creation
                if self.logs.get(self.name, p) is None:
                    self.logs.create(self.name, p, cfg)

    def partition_of(self, key: str) -> int:
        return partition_for(key, self.partitions)

    def log(self, partition: int) -> PartitionLog:
        lg = self.logs.get(self.name, partition)
        if lg is None:
            raise RuntimeError(f"{self.name}-{partition} is not open")
        return lg

    async def append(self, partition: int, records: list[tuple[bytes, bytes | None]]) -> int:
        """Append keyed records as one batch; returns its base offset once the flush policy is
        met (so a coordinator answers only after the write is as durable as any produce)."""
        await self.ensure()
        lg = self.log(partition)
        now = int(time.time() * 1000)
        batch = encode_batch([(k, v, [], now) for k, v in records])
        base, _ = lg.append(bytearray(batch), now)
        if lg.flush_due:
            await lg.flush()
        return base

    def replay(self) -> Iterator[tuple[bytes | None, bytes | None]]:
        """Every (key, value) in offset order, partition by partition."""
        if not self.exists:
            return
        self.partitions = self.controller.image.topics[self.name].partitions
        for p in range(self.partitions):
            lg = self.logs.get(self.name, p)
            if lg is None:
                continue
            off = lg.log_start_offset
            while off < lg.end_offset:
                data = lg.read(off, 4 << 20)
                if not data:
                    break
                progressed = False
                for pos, _size in iter_batches(data):
                    for r in decode_batch(data, pos):
                        if r.offset >= off:
                            yield r.key, r.value
                            off = r.offset + 1
                            progressed = True
                if not progressed:
                    break
