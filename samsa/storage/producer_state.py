"""Per-partition producer state: idempotent deduplication and sequence checks, open transactions
(for the last stable offset) and the aborted-transaction index.

Kafka's rules (ProducerStateManager): the last 5 batches of every producer are remembered; a batch
identical in (epoch, first sequence, last sequence) to one of them is a retry and is acknowledged
with its original offset without being appended again; a gap in sequences is
OUT_OF_ORDER_SEQUENCE_NUMBER; an older epoch is INVALID_PRODUCER_EPOCH; a new epoch must restart at
sequence 0. State is snapshotted (on roll and clean shutdown) and rebuilt from the snapshot plus the
batch headers after it, so it survives `kill -9`.
"""

from __future__ import annotations

import json
import struct
from bisect import bisect_left
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from samsa.protocol.batch import BatchHeader

from . import fsio

INVALID_PRODUCER_EPOCH = 47
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
MAX_CACHED_BATCHES = 5
INT32_MAX = 2**31 - 1
ABORT, COMMIT = 0, 1
_TXN_ENTRY = struct.Struct(">qqqq")  # producer id, first offset, last offset, last stable offset


class ProducerStateError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class BatchMeta:
    first_seq: int
    last_seq: int
    base_offset: int
    last_offset: int


@dataclass
class ProducerEntry:
    producer_id: int
    epoch: int = -1
    batches: deque[BatchMeta] = field(default_factory=lambda: deque(maxlen=MAX_CACHED_BATCHES))
    last_timestamp: int = -1
    txn_first_offset: int = -1  # first offset of the open transaction, -1 if none
    coordinator_epoch: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


@dataclass(frozen=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def _next_seq(seq: int) -> int:
    return 0 if seq == INT32_MAX else seq + 1


class ProducerStateManager:
    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.producers: dict[int, ProducerEntry] = {}
        self.aborted: list[AbortedTxn] = []  # sorted by last_offset
        self._aborted_keys: set[tuple[int, int]] = set()
        self.index_path = directory / "aborted.txnindex"
        self._index_unsynced = False  # written since the last flush took it
        # snapshots at offsets above this are kept beyond the newest two (tiered storage copies
        # the snapshot at each segment's end with the segment)
        self.keep_above = 2**63

    # ---- validation (before append) ------------------------------------------------------
    def check(self, h: BatchHeader) -> int | None:
        """Validate an incoming idempotent/transactional batch. Returns the original base offset
        when it is a retried duplicate, None when it must be appended; raises on errors."""
        e = self.producers.get(h.producer_id)
        first = h.base_sequence
        last = (first + h.last_offset_delta) % (INT32_MAX + 1) if first >= 0 else -1
        if e is None or e.epoch == -1:
            return None  # unknown producer: accepted whatever its sequence (KIP-360)
        if h.producer_epoch < e.epoch:
            raise ProducerStateError(INVALID_PRODUCER_EPOCH,
                                     f"Producer epoch {h.producer_epoch} is older than the current "
                                     f"epoch {e.epoch} of producer {h.producer_id}")
        if first < 0:
            return None
        if h.producer_epoch > e.epoch:
            if first != 0:
                raise ProducerStateError(
                    OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"Producer {h.producer_id} started epoch {h.producer_epoch} at sequence "
                    f"{first}, expected 0")
            return None
        for b in e.batches:
            if b.first_seq == first and b.last_seq == last:
                return b.base_offset
        if e.batches and first != _next_seq(e.last_seq):
            raise ProducerStateError(
                OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"Out of order sequence number for producer {h.producer_id}: expected "
                f"{_next_seq(e.last_seq)}, got {first}")
        return None

    # ---- updates (after append) -----------------------------------------------------------
    def on_append(self, h: BatchHeader, base_offset: int) -> None:
        """Record a batch that is now in the log (also used when replaying the log)."""
        if h.producer_id < 0:
            return
        e = self.producers.get(h.producer_id)
        if e is None:
            e = self.producers[h.producer_id] = ProducerEntry(h.producer_id)
        if h.producer_epoch != e.epoch:
            e.batches.clear()
            e.epoch = h.producer_epoch
        e.last_timestamp = max(e.last_timestamp, h.max_timestamp)
        if h.is_control:
            return  # markers are handled by on_marker
        if h.base_sequence >= 0:
            last_seq = (h.base_sequence + h.last_offset_delta) % (INT32_MAX + 1)
            e.batches.append(BatchMeta(h.base_sequence, last_seq, base_offset,
                                       base_offset + h.last_offset_delta))
        if h.is_transactional and e.txn_first_offset < 0:
            e.txn_first_offset = base_offset

    def coordinator_epoch_of(self, producer_id: int) -> int:
        """The coordinator epoch of the producer's last marker here (-1: none yet)."""
        e = self.producers.get(producer_id)
        return -1 if e is None else e.coordinator_epoch

    def on_marker(self, producer_id: int, epoch: int, marker_type: int, offset: int,
                  coordinator_epoch: int, lso_before: int) -> AbortedTxn | None:
        """A COMMIT/ABORT marker at `offset` closes the producer's open transaction."""
        e = self.producers.get(producer_id)
        if e is None:
            e = self.producers[producer_id] = ProducerEntry(producer_id, epoch)
        e.epoch = max(e.epoch, epoch)
        e.coordinator_epoch = coordinator_epoch
        first, e.txn_first_offset = e.txn_first_offset, -1
        if marker_type == ABORT and first >= 0:
            entry = AbortedTxn(producer_id, first, offset, lso_before)
            self._add_aborted(entry, persist=True)
            return entry
        return None

    # ---- transactions ---------------------------------------------------------------------
    def first_unstable_offset(self) -> int | None:
        firsts = [e.txn_first_offset for e in self.producers.values() if e.txn_first_offset >= 0]
        return min(firsts) if firsts else None

    def aborted_between(self, start: int, end: int) -> list[AbortedTxn]:
        """Aborted transactions that may have records in [start, end)."""
        i = bisect_left([a.last_offset for a in self.aborted], start)
        return [a for a in self.aborted[i:] if a.first_offset < end]

    def _add_aborted(self, a: AbortedTxn, persist: bool) -> None:
        key = (a.producer_id, a.last_offset)
        if key in self._aborted_keys:
            return
        self._aborted_keys.add(key)
        self.aborted.append(a)
        if len(self.aborted) > 1 and self.aborted[-2].last_offset > a.last_offset:
            self.aborted.sort(key=lambda x: x.last_offset)
        if persist:
            fsio.append_file(self.index_path, _TXN_ENTRY.pack(
                a.producer_id, a.first_offset, a.last_offset, a.last_stable_offset))
            self._index_unsynced = True

    def load_aborted_index(self, end_offset: int) -> None:
        """Read the index, dropping entries past the (possibly truncated) end of the log."""
        try:
            data = self.index_path.read_bytes()
        except FileNotFoundError:
            return
        keep = []
        for pid, first, last, lso in _TXN_ENTRY.iter_unpack(data[: len(data) // 32 * 32]):
            if last < end_offset:
                keep.append(AbortedTxn(pid, first, last, lso))
        for a in keep:
            self._add_aborted(a, persist=False)
        if len(keep) * 32 != len(data):
            self._rewrite_index()

    def forget_aborted(self, markers: set[tuple[int, int]]) -> None:
        """Drop the entries of aborted transactions the log cleaner emptied, keyed by (producer id,
        marker offset): as in Kafka's cleaned transaction index, an entry must not outlive its data,
        or its marker once that goes too (read_committed consumers would then skip the producer's
        later transactions)."""
        keep = [a for a in self.aborted if (a.producer_id, a.last_offset) not in markers]
        if len(keep) != len(self.aborted):
            self.aborted = keep
            self._aborted_keys = {(a.producer_id, a.last_offset) for a in keep}
            self._rewrite_index()

    def truncate_aborted_below(self, log_start: int) -> None:
        """Retention removed everything below log_start: entries wholly below it go."""
        if self.aborted and self.aborted[0].last_offset < log_start:
            self.aborted = [a for a in self.aborted if a.last_offset >= log_start]
            self._aborted_keys = {(a.producer_id, a.last_offset) for a in self.aborted}
            self._rewrite_index()

    def truncate_aborted_from(self, end_offset: int) -> None:
        """The log was truncated at end_offset: entries whose marker is at or above it go."""
        if self.aborted and self.aborted[-1].last_offset >= end_offset:
            self.aborted = [a for a in self.aborted if a.last_offset < end_offset]
            self._aborted_keys = {(a.producer_id, a.last_offset) for a in self.aborted}
            self._rewrite_index()

    def reset(self) -> None:
        """Forget everything, on disk too (the log was emptied): snapshots and the aborted index."""
        self.producers = {}
        for path in self.dir.glob("*.snapshot"):
            fsio.unlink(path)
        if self.aborted or self.index_path.exists():
            self.aborted = []
            self._aborted_keys = set()
            self._rewrite_index()

    def _rewrite_index(self) -> None:
        fsio.replace_file(self.index_path, b"".join(
            _TXN_ENTRY.pack(a.producer_id, a.first_offset, a.last_offset, a.last_stable_offset)
            for a in self.aborted), sync=True)
        self._index_unsynced = True  # the rename: its directory needs a sync

    def take_unsynced_index(self) -> Path | None:
        """The index's path when it changed since the last call (a flush then fsyncs it and the
        directory), else None."""
        if not self._index_unsynced:
            return None
        self._index_unsynced = False
        return self.index_path

    # ---- snapshots ------------------------------------------------------------------------
    def snapshot(self, offset: int, sync: bool = False) -> None:
        """Persist the state as of `offset` (everything below it applied). Unsynced on a roll: a
        snapshot a crash tore is skipped at load (an older one, or the log, is replayed)."""
        data = {"offset": offset, "producers": [
            {"pid": e.producer_id, "epoch": e.epoch, "ts": e.last_timestamp,
             "txn": e.txn_first_offset, "ce": e.coordinator_epoch,
             "batches": [[b.first_seq, b.last_seq, b.base_offset, b.last_offset]
                         for b in e.batches]} for e in self.producers.values()]}
        path = self.dir / f"{offset:020d}.snapshot"
        fsio.replace_file(path, json.dumps(data).encode(), sync=sync)
        for old in sorted(self.dir.glob("*.snapshot"))[:-2]:
            if int(old.name.split(".")[0]) <= self.keep_above:
                fsio.unlink(old)

    def load_snapshot(self, end_offset: int) -> int:
        """Load the newest snapshot at or below end_offset; returns the offset to replay from."""
        for path in sorted(self.dir.glob("*.snapshot"), reverse=True):
            off = int(path.name.split(".")[0])
            if off > end_offset:
                fsio.unlink(path)  # beyond a truncated tail
                continue
            try:
                data = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            self.producers = {}
            for p in data["producers"]:
                e = ProducerEntry(p["pid"], p["epoch"], last_timestamp=p["ts"],
                                  txn_first_offset=p["txn"], coordinator_epoch=p["ce"])
                for b in p["batches"]:
                    e.batches.append(BatchMeta(*b))
                self.producers[e.producer_id] = e
            return off
        self.producers = {}
        return -1

    def expire(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers idle longer than producer.id.expiration.ms (never one with an open
        transaction)."""
        gone = [pid for pid, e in self.producers.items()
                if e.txn_first_offset < 0 and e.last_timestamp >= 0
                and now_ms - e.last_timestamp > expiration_ms]
        for pid in gone:
            del self.producers[pid]
        return len(gone)
