"""Transaction coordinator: transactional ids, producer-id/epoch fencing, the transaction state
machine and its markers.

State changes are records in `__transaction_state` (one per transactional id, replayed at start).
EndTxn writes PrepareCommit/PrepareAbort, then a COMMIT/ABORT marker into every partition of the
transaction (data partitions and the `__consumer_offsets` partitions holding its offsets), then
CompleteCommit/CompleteAbort. After a crash, a transaction found in a Prepare state is completed
at start; one found Ongoing is aborted when its timeout passes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any

from samsa.cluster.internal_topic import InternalTopic, ReplicationError
from samsa.coordinator.routing import append_error

log = logging.getLogger("samsa.txn")

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
INVALID_TRANSACTION_TIMEOUT = 50
CONCURRENT_TRANSACTIONS = 51
OPERATION_NOT_ATTEMPTED = 55
TRANSACTIONAL_ID_NOT_FOUND = 105
PRODUCER_FENCED = 90
MAX_EPOCH = 32766


class TxnState(StrEnum):
    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    DEAD = "Dead"


class TxnError(Exception):
    def __init__(self, code: int, message: str = "") -> None:
        super().__init__(message or str(code))
        self.code = code


@dataclass
class TxnMetadata:
    transactional_id: str
    producer_id: int
    epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[tuple[str, int]] = field(default_factory=set)
    start_ms: int = -1
    update_ms: int = field(default_factory=lambda: int(time.time() * 1000))

    def to_json(self) -> bytes:
        return json.dumps({"pid": self.producer_id, "epoch": self.epoch,
                           "timeout": self.timeout_ms, "state": self.state.value,
                           "partitions": sorted(self.partitions), "start": self.start_ms,
                           "update": self.update_ms}).encode()


def _copy(meta: TxnMetadata) -> TxnMetadata:
    return TxnMetadata(**{f.name: getattr(meta, f.name) for f in fields(TxnMetadata)}
                       | {"partitions": set(meta.partitions)})


# (producer id, epoch, commit?, partitions, coordinator epoch) -> writes the markers
MarkerWriter = Callable[[int, int, bool, set[tuple[str, int]], int], Awaitable[None]]


class TxnConfig:
    def __init__(self, max_timeout_ms: int = 900000, check_interval_ms: int = 10000,
                 id_expiration_ms: int = 7 * 86400 * 1000, marker_wait_ms: int = 10000) -> None:
        self.max_timeout_ms = max_timeout_ms
        # how long EndTxn waits for the markers before answering (they are retried until
        # written either way; the PrepareCommit/PrepareAbort record is the decision)
        self.marker_wait_ms = marker_wait_ms
        self.check_interval_ms = check_interval_ms
        self.id_expiration_ms = id_expiration_ms


def _now() -> int:
    return int(time.time() * 1000)


class TransactionCoordinator:
    def __init__(self, topic: InternalTopic, config: TxnConfig,
                 allocate_pid: Callable[[], Awaitable[int]], write_markers: MarkerWriter,
                 offsets_partition: Callable[[str], tuple[str, int]],
                 partition_exists: Callable[[str, int], bool]) -> None:
        self.topic = topic
        self.config = config
        self.allocate_pid = allocate_pid
        self.write_markers = write_markers
        self.offsets_partition = offsets_partition
        self.partition_exists = partition_exists
        self.txns: dict[str, TxnMetadata] = {}
        # each id's state as last written to (or replayed from) the log: a failed write puts
        # the in-memory state back to it, as Kafka drops a pending transition
        self._durable: dict[str, TxnMetadata] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._completing: set[asyncio.Task[None]] = set()
        self.loaded: set[int] = set()  # __transaction_state partitions replayed into memory
        self._started = False

    # ---- lifecycle ---------------------------------------------------------------------
    def load(self, partitions: set[int] | None = None) -> None:
        """Rebuild the transactions of the __transaction_state partitions this broker hosts (all
        at start, or the given ones when it gains them later: their decided transactions are
        completed then)."""
        late = partitions is not None
        if partitions is None:
            partitions = {p for p in range(self.topic.count()) if self.topic.hosted(p)}
        self.loaded |= partitions
        before = set(self.txns)
        for key, value in self.topic.replay_values(partitions):
            tid = json.loads(key)["tid"]
            if value is None:
                self.txns.pop(tid, None)
                self._durable.pop(tid, None)
                continue
            v = json.loads(value)
            self.txns[tid] = TxnMetadata(tid, v["pid"], v["epoch"], v["timeout"],
                                         TxnState(v["state"]),
                                         {(t, p) for t, p in v["partitions"]}, v["start"],
                                         v["update"])
            self._durable[tid] = _copy(self.txns[tid])
        if late and self._started:
            for tid in set(self.txns) - before:
                meta = self.txns[tid]
                if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                    self._complete_soon(meta)

    def unload(self, partitions: set[int]) -> None:
        """This broker no longer leads these __transaction_state partitions: forget their
        transactions (the new leader replays them and completes decided ones)."""
        self.loaded -= partitions
        of = self.topic.partition_of
        for tid in [t for t in self.txns if of(t) in partitions]:
            del self.txns[tid]
            self._durable.pop(tid, None)

    def start(self) -> None:
        self._started = True
        self._tasks.append(asyncio.create_task(self._recover_then_watch()))

    def stop(self) -> None:
        for t in [*self._tasks, *self._completing]:
            t.cancel()

    def _complete_soon(self, meta: TxnMetadata) -> asyncio.Task[None]:
        """Write a decided transaction's markers in the background (under its lock), unless
        someone completes it first."""
        async def run() -> None:
            backoff = 0.1
            while True:
                async with self._lock(meta.transactional_id):
                    if meta.state not in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT) \
                            or self.txns.get(meta.transactional_id) is not meta:
                        return  # done, or no longer ours: the new coordinator finishes it
                    try:
                        await self._complete(meta)
                        return
                    except TxnError as e:
                        if e.code == NOT_COORDINATOR:
                            return
                        log.warning("completing transaction %s: %s; retrying",
                                    meta.transactional_id, e)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)

        task = asyncio.create_task(run())
        self._completing.add(task)
        task.add_done_callback(self._completing.discard)
        return task

    async def _recover_then_watch(self) -> None:
        # finish what a crash interrupted: markers of a decided transaction are (re)written
        for meta in list(self.txns.values()):
            if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                self._complete_soon(meta)  # retried until written (or no longer ours)
        while True:
            await asyncio.sleep(self.config.check_interval_ms / 1000)
            try:
                await self.abort_timed_out(_now())
                await self.expire_ids(_now())
            except Exception:
                log.exception("aborting timed-out transactions failed")

    def _lock(self, tid: str) -> asyncio.Lock:
        return self._locks.setdefault(tid, asyncio.Lock())

    async def _persist(self, meta: TxnMetadata) -> None:
        """Write the id's new state; if the write does not reach the ISR, the in-memory state
        goes back to the last one written and the caller gets a retriable TxnError (a transition
        that is not durable must not be acted on: no markers for an unwritten PrepareCommit)."""
        tid = meta.transactional_id
        meta.update_ms = _now()
        try:
            await self.topic.append(self.topic.partition_of(tid),
                                    [(json.dumps({"tid": tid}).encode(), meta.to_json())])
        except ReplicationError as e:
            self._restore(meta)
            raise TxnError(append_error(e.code), str(e)) from None
        self._durable[tid] = _copy(meta)

    def _restore(self, meta: TxnMetadata) -> None:
        tid = meta.transactional_id
        last = self._durable.get(tid)
        if last is None:
            if self.txns.get(tid) is meta:
                del self.txns[tid]  # never written: as if InitProducerId had not happened
            return
        for f in fields(TxnMetadata):
            setattr(meta, f.name, getattr(last, f.name))
        meta.partitions = set(last.partitions)

    # ---- InitProducerId ------------------------------------------------------------------
    async def init_producer_id(self, tid: str, timeout_ms: int, pid_hint: int,
                               epoch_hint: int) -> tuple[int, int]:
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            raise TxnError(INVALID_TRANSACTION_TIMEOUT,
                           f"The transaction timeout {timeout_ms} ms is larger than "
                           f"transaction.max.timeout.ms or not positive")
        await self.topic.ensure()
        async with self._lock(tid):
            meta = self.txns.get(tid)
            if meta is None:
                pid = await self.allocate_pid()
                meta = TxnMetadata(tid, pid, 0, timeout_ms)
                self.txns[tid] = meta
                await self._persist(meta)
                return meta.producer_id, meta.epoch
            if pid_hint >= 0 and (pid_hint, epoch_hint) != (meta.producer_id, meta.epoch):
                raise TxnError(PRODUCER_FENCED if pid_hint == meta.producer_id
                               else INVALID_PRODUCER_EPOCH,
                               "The producer id and epoch do not match the transactional id's")
            if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                await self._complete(meta)
            if meta.state == TxnState.ONGOING:
                # a new incarnation: fence the old one and abort what it left open
                await self._bump_epoch(meta)
                meta.state = TxnState.PREPARE_ABORT
                await self._persist(meta)
                await self._complete(meta)
            await self._bump_epoch(meta)
            meta.timeout_ms = timeout_ms
            meta.state = TxnState.EMPTY
            meta.partitions = set()
            meta.start_ms = -1
            await self._persist(meta)
            return meta.producer_id, meta.epoch

    async def _bump_epoch(self, meta: TxnMetadata) -> None:
        if meta.epoch >= MAX_EPOCH:
            meta.producer_id = await self.allocate_pid()
            meta.epoch = 0
        else:
            meta.epoch += 1

    # ---- adding partitions / offsets -------------------------------------------------------
    def _check(self, tid: str, pid: int, epoch: int) -> TxnMetadata:
        meta = self.txns.get(tid)
        if meta is None or meta.state == TxnState.DEAD:
            raise TxnError(INVALID_PRODUCER_ID_MAPPING,
                           f"The producer id is not known for transactional id {tid}")
        if meta.producer_id != pid:
            raise TxnError(INVALID_PRODUCER_ID_MAPPING,
                           f"Producer id {pid} is not the current one of {tid}")
        if epoch < meta.epoch:
            raise TxnError(PRODUCER_FENCED,
                           f"Producer epoch {epoch} has been fenced by epoch {meta.epoch}")
        if epoch > meta.epoch:
            raise TxnError(INVALID_PRODUCER_EPOCH, f"Unknown producer epoch {epoch}")
        if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            raise TxnError(CONCURRENT_TRANSACTIONS, "The transaction is completing")
        return meta

    async def add_partitions(self, tid: str, pid: int, epoch: int,
                             partitions: list[tuple[str, int]],
                             verify_only: bool = False) -> dict[tuple[str, int], int]:
        async with self._lock(tid):
            try:
                meta = self._check(tid, pid, epoch)
            except TxnError as e:
                return dict.fromkeys(partitions, e.code)
            unknown = [tp for tp in partitions if not self.partition_exists(*tp)]
            if unknown:
                return {tp: UNKNOWN_TOPIC_OR_PARTITION if tp in unknown
                        else OPERATION_NOT_ATTEMPTED for tp in partitions}
            if verify_only:
                return {tp: NONE if tp in meta.partitions and meta.state == TxnState.ONGOING
                        else INVALID_TXN_STATE for tp in partitions}
            new = set(partitions) - meta.partitions
            if new or meta.state != TxnState.ONGOING:
                if meta.state != TxnState.ONGOING:
                    meta.state = TxnState.ONGOING
                    meta.partitions = set()
                    meta.start_ms = _now()
                meta.partitions |= set(partitions)
                try:
                    await self._persist(meta)
                except TxnError as e:
                    return dict.fromkeys(partitions, e.code)
            return dict.fromkeys(partitions, NONE)

    async def add_offsets(self, tid: str, pid: int, epoch: int, group_id: str) -> int:
        result = await self.add_partitions(tid, pid, epoch, [self.offsets_partition(group_id)])
        return next(iter(result.values()))

    def check_offsets_commit(self, tid: str, pid: int, epoch: int) -> int:
        """TxnOffsetCommit is valid only inside the producer's ongoing transaction."""
        try:
            meta = self._check(tid, pid, epoch)
        except TxnError as e:
            return e.code
        return NONE if meta.state == TxnState.ONGOING else INVALID_TXN_STATE

    # ---- ending ------------------------------------------------------------------------
    async def end_txn(self, tid: str, pid: int, epoch: int, commit: bool) -> tuple[int, int]:
        async with self._lock(tid):
            meta = self.txns.get(tid)
            if meta is not None and meta.producer_id == pid and epoch == meta.epoch and \
                    meta.state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
                done_commit = meta.state == TxnState.COMPLETE_COMMIT
                if done_commit == commit:
                    return meta.producer_id, meta.epoch  # a retry of what already happened
                raise TxnError(INVALID_TXN_STATE, "The transaction was already completed "
                                                  "the other way")
            meta = self._check(tid, pid, epoch)
            if meta.state != TxnState.ONGOING:
                if not commit and meta.state == TxnState.EMPTY:
                    return meta.producer_id, meta.epoch  # aborting nothing
                raise TxnError(INVALID_TXN_STATE,
                               f"EndTxn in state {meta.state.value} is not allowed")
            meta.state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
            await self._persist(meta)
            answer = meta.producer_id, meta.epoch
            task = self._complete_soon(meta)
        # Kafka answers once the decision is written and sends the markers after; Samsa also
        # waits for them (bounded), so a reader that starts right after the commit sees it
        with contextlib.suppress(Exception):  # the decision is durable: the answer is success
            await asyncio.wait_for(asyncio.shield(task), self.config.marker_wait_ms / 1000)
        return answer

    async def _complete(self, meta: TxnMetadata) -> None:
        commit = meta.state == TxnState.PREPARE_COMMIT
        await self.write_markers(meta.producer_id, meta.epoch, commit, set(meta.partitions),
                                 self.topic.leader_epoch_of(meta.transactional_id))
        meta.state = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        meta.partitions = set()
        await self._persist(meta)

    async def abort_timed_out(self, now_ms: int) -> int:
        """Kafka aborts transactions open longer than their timeout, bumping the epoch so the
        producer that left them is fenced."""
        n = 0
        for meta in list(self.txns.values()):
            if meta.state != TxnState.ONGOING or now_ms - meta.start_ms <= meta.timeout_ms:
                continue
            async with self._lock(meta.transactional_id):
                if meta.state != TxnState.ONGOING:
                    continue
                log.info("aborting timed-out transaction %s (producer %d epoch %d)",
                         meta.transactional_id, meta.producer_id, meta.epoch)
                await self._bump_epoch(meta)
                meta.state = TxnState.PREPARE_ABORT
                await self._persist(meta)
                await self._complete(meta)
                n += 1
        return n

    async def expire_ids(self, now_ms: int) -> int:
        """Forget transactional ids idle longer than transactional.id.expiration.ms (only those
        with no transaction in flight), writing a tombstone so a replay forgets them too."""
        n = 0
        for meta in list(self.txns.values()):
            if meta.state not in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT,
                                  TxnState.COMPLETE_ABORT):
                continue
            if now_ms - meta.update_ms <= self.config.id_expiration_ms:
                continue
            async with self._lock(meta.transactional_id):
                key = json.dumps({"tid": meta.transactional_id}).encode()
                try:
                    await self.topic.append(self.topic.partition_of(meta.transactional_id),
                                            [(key, None)])
                except ReplicationError:
                    continue  # not durable: kept, tried again at the next check
                self.txns.pop(meta.transactional_id, None)
                self._durable.pop(meta.transactional_id, None)
                n += 1
        return n

    async def abort(self, tid: str) -> None:
        """Operator abort (`samsa transactions abort`): as a timeout would."""
        meta = self.txns.get(tid)
        if meta is None:
            raise TxnError(TRANSACTIONAL_ID_NOT_FOUND, f"Unknown transactional id {tid}")
        async with self._lock(tid):
            if meta.state == TxnState.ONGOING:
                await self._bump_epoch(meta)
                meta.state = TxnState.PREPARE_ABORT
                await self._persist(meta)
                await self._complete(meta)

    # ---- describe ------------------------------------------------------------------------
    def describe(self, tid: str) -> dict[str, Any]:
        meta = self.txns.get(tid)
        if meta is None:
            return {"error_code": TRANSACTIONAL_ID_NOT_FOUND, "transactional_id": tid,
                    "transaction_state": "", "transaction_timeout": 0,
                    "transaction_start_time": -1, "producer_id": -1, "producer_epoch": -1,
                    "topics": []}
        by_topic: dict[str, list[int]] = {}
        for t, p in sorted(meta.partitions):
            by_topic.setdefault(t, []).append(p)
        return {"error_code": NONE, "transactional_id": tid,
                "transaction_state": meta.state.value, "transaction_timeout": meta.timeout_ms,
                "transaction_start_time": meta.start_ms, "producer_id": meta.producer_id,
                "producer_epoch": meta.epoch,
                "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]}
