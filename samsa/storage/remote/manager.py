"""The remote log manager (KIP-405's RemoteLogManager): copies closed segments of the partitions
this broker leads to the remote store, deletes remote segments past the total retention, and
cleans what a crash left half done.

The protocol for one segment, each step published in `__remote_log_metadata` before the next:
COPY_SEGMENT_STARTED, then the upload (in the copier thread pool), then COPY_SEGMENT_FINISHED.
Readers see only FINISHED segments, and local retention deletes a local segment only once a
FINISHED copy covers it, so a kill -9 anywhere leaves either the local segment or a whole remote
one. Deleting: the earliest offset moves first, then DELETE_SEGMENT_STARTED (the segment is no
longer readable), the objects go (expiration thread pool), DELETE_SEGMENT_FINISHED. A segment
left in COPY_SEGMENT_STARTED or DELETE_SEGMENT_STARTED by a crash is deleted by the next leader's
expiration pass; objects the metadata does not know at all (a lost metadata write) are found by
listing the store.

Nothing here blocks the broker event loop: the store is touched only from the thread pools,
the metadata writes are ordinary appends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import signal
import struct
import time
import uuid
from array import array
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ..leader_epoch import render
from ..log import PartitionLog
from .config import RemoteLogManagerConfig
from .metadata import RemoteLogMetadataManager
from .rsm import (
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    RemoteStorageManager,
    TopicIdPartition,
)

log = logging.getLogger("samsa.remote")
S = RemoteLogSegmentState
LINK_SUFFIX = ".tiering"  # a hard link to a segment's log while it is being copied
_IDX = struct.Struct(">ii")
_TIDX = struct.Struct(">qi")
_TXN = struct.Struct(">qqqq")
# a COPY_SEGMENT_STARTED segment of ANOTHER broker is taken for dangling only after this long
# (it may still be uploading); this broker's own are dangling when no copy of it is running
FOREIGN_DANGLING_MS = 300_000
# objects the metadata does not know are deleted once this old (a copy publishes its
# COPY_SEGMENT_STARTED before it uploads, so only a lost metadata write leaves such objects)
ORPHAN_GRACE_MS = int(os.environ.get("SAMSATEST_REMOTE_ORPHAN_GRACE_MS") or 60_000)  # tests
# a partition whose topic (by id) the image does not hold must stay so this long before its remote
# data is deleted (an image lagging behind the metadata topic is not a deletion)
GONE_CONFIRM_S = 5.0

# tests: called with a step name at each step of a copy or a deletion
step_hook: Callable[[str], None] | None = None
# crash tests of a broker subprocess: "<step>:<n>" SIGKILLs the process at the n-th time it reaches
# that step (copy-started, log-copying, copy-uploaded, copy-finished, expire-start-moved,
# delete-started, delete-log-removed, delete-removed, delete-finished)
KILL_AT_ENV = "SAMSATEST_REMOTE_KILL_AT"


def install_kill_hook(spec: str | None = None) -> None:
    """Set step_hook from KILL_AT_ENV (no-op when unset)."""
    global step_hook
    spec = spec if spec is not None else os.environ.get(KILL_AT_ENV)
    if not spec:
        return
    step, _, nth = spec.rpartition(":")
    left = [int(nth)]

    def hook(name: str) -> None:
        if name == step:
            left[0] -= 1
            if left[0] <= 0:
                log.warning("test hook: kill -9 at remote step %s", name)
                os.kill(os.getpid(), signal.SIGKILL)
    step_hook = hook


def _step(name: str) -> None:
    if step_hook is not None:
        step_hook(name)


def now_ms() -> int:
    return int(time.time() * 1000)


class RemoteLogManager:
    """One per broker when remote.log.storage.system.enable=true (broker.remote_log_manager)."""

    def __init__(self, cfg: RemoteLogManagerConfig, node_id: int, rsm: RemoteStorageManager,
                 rlmm: RemoteLogMetadataManager, logs: Any,
                 leader_log: Callable[[str, int], PartitionLog | None],
                 topic_id: Callable[[str], uuid.UUID | None],
                 cleanup_node: Callable[[], bool] = lambda: True) -> None:
        self.cfg = cfg
        self.node_id = node_id
        self.rsm = rsm
        self.rlmm = rlmm
        self.logs = logs
        self.leader_log = leader_log
        self.topic_id = topic_id
        self.cleanup_node = cleanup_node  # this broker removes the remote data of deleted topics
        self.copier = ThreadPoolExecutor(cfg.copier_threads, "samsa-rlm-copier")
        self.expirer = ThreadPoolExecutor(cfg.expiration_threads, "samsa-rlm-expiration")
        # for the read path (samsa.storage.remote.reader): remote.log.reader.threads
        self.reader_pool = ThreadPoolExecutor(cfg.reader_threads, "samsa-remote-reader")
        self._copying: dict[TopicIdPartition, asyncio.Task[None]] = {}
        self._expiring: dict[TopicIdPartition, asyncio.Task[None]] = {}
        self._inflight: set[uuid.UUID] = set()  # segment ids being copied by this broker
        self._retry: dict[tuple[str, TopicIdPartition], tuple[int, float]] = {}
        self._task: asyncio.Task[None] | None = None
        self._runs = 0
        self._last_orphan_scan = 0.0
        self._closed = False
        # remote.log.manager.copy.max.bytes.per.second: when the next copy may start
        self._copy_quota_free_at = 0.0
        self._gone_since: dict[TopicIdPartition, float] = {}  # partitions of topics not seen
        # the broker's settings (the read path reads its own from it); the read path's reader
        # (samsa.storage.remote.reader), set lazily by it, closed here
        self.config: Any = None
        self.reader: Any = None
        rlmm.listeners.append(self._on_metadata)

    # ---- lookups (also for the read path) ------------------------------------------------
    def tp_for(self, topic: str, partition: int) -> TopicIdPartition | None:
        tid = self.topic_id(topic)
        return None if tid is None else TopicIdPartition(tid, topic, partition)

    def enabled(self, topic: str) -> bool:
        """The topic is tiered (remote.storage.enable, with the system on)."""
        for (t, _p), lg in self.logs.logs.items():
            if t == topic:
                return bool(lg.config.remote_storage_enable)
        return False

    # ---- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        """Replay the metadata, bring the local logs in line with it, start the periodic task."""
        self.rlmm.start()
        for lg in list(self.logs.logs.values()):
            for p in lg.dir.glob("*" + LINK_SUFFIX):  # copies a crash interrupted
                with contextlib.suppress(OSError):
                    p.unlink()
            self._sync_log(lg)
        self._task = asyncio.create_task(self._loop())

    async def close(self) -> None:
        self._closed = True
        tasks = [t for t in (self._task, *self._copying.values(), *self._expiring.values())
                 if t is not None]
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(BaseException):
                await t
        self.rlmm.close()
        if self.reader is not None:
            with contextlib.suppress(Exception):
                self.reader.close()
        close_topic = getattr(self.rlmm.topic, "close", None)  # forwarding channels (tier-ext)
        if close_topic is not None:
            with contextlib.suppress(Exception):
                await close_topic()
        for pool in (self.copier, self.expirer, self.reader_pool):
            pool.shutdown(wait=False, cancel_futures=True)
        with contextlib.suppress(Exception):
            self.rsm.close()

    async def _loop(self) -> None:
        while not self._closed:
            try:
                await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("remote log manager pass failed")
            await asyncio.sleep(self.cfg.task_interval_ms / 1000)

    async def run_once(self) -> None:
        """One scheduling pass: copies and expiration for the partitions led here, the remote data
        of deleted topics, and (now and then) objects the metadata does not know."""
        self._runs += 1
        self.rlmm.catch_up()
        for (topic, p), lg in list(self.logs.logs.items()):
            tp = self.tp_for(topic, p)
            if tp is None or lg.deleted:
                continue
            self._sync_log(lg, tp)
            lead = self.leader_log(topic, p)
            if lead is None or lead is not lg:
                continue  # only the leader copies and expires (followers learn from metadata)
            lg = lead
            if lg.tiered and not lg.config.remote_log_copy_disable:
                self._spawn(self._copying, "copy", tp, self._copy_partition(tp, lg))
            if lg.tiered or self.rlmm.list_remote_log_segments(tp):
                self._spawn(self._expiring, "expire", tp, self._expire_partition(tp, lg))
        if self.cleanup_node():
            await self._delete_removed_partitions()
        interval = max(self.cfg.task_interval_ms * 10, ORPHAN_GRACE_MS) / 1000
        if time.monotonic() - self._last_orphan_scan >= interval or self._runs == 1:
            self._last_orphan_scan = time.monotonic()
            await self.clean_orphans()

    def _spawn(self, tasks: dict[TopicIdPartition, asyncio.Task[None]], kind: str,
               tp: TopicIdPartition, coro: Any) -> None:
        t = tasks.get(tp)
        retry = self._retry.get((kind, tp))
        if (t is not None and not t.done()) or (retry is not None
                                                and time.monotonic() < retry[1]):
            coro.close()
            return
        task = asyncio.create_task(coro)
        tasks[tp] = task

    def _failed(self, kind: str, tp: TopicIdPartition, e: BaseException) -> None:
        """Back off exponentially (remote.log.manager.task.retry.*) before the next attempt."""
        n, _ = self._retry.get((kind, tp), (0, 0.0))
        wait = min(self.cfg.retry_backoff_ms * (2 ** n), self.cfg.retry_backoff_max_ms)
        j = self.cfg.retry_jitter
        wait *= random.uniform(1 - j, 1 + j)
        self._retry[(kind, tp)] = (n + 1, time.monotonic() + wait / 1000)
        log.warning("remote %s of %s failed (attempt %d, next in %.1fs): %s", kind, tp, n + 1,
                    wait / 1000, e)

    def _succeeded(self, kind: str, tp: TopicIdPartition) -> None:
        self._retry.pop((kind, tp), None)

    async def wait_idle(self) -> None:
        """Until no copy or expiration task runs (tests, shutdown)."""
        for t in list(self._copying.values()) + list(self._expiring.values()):
            with contextlib.suppress(BaseException):
                await t

    # ---- metadata -> local logs ------------------------------------------------------------
    def _on_metadata(self, tp: TopicIdPartition) -> None:
        lg = self.logs.get(tp.topic, tp.partition)
        if lg is not None and self.topic_id(tp.topic) == tp.topic_id:
            self._sync_log(lg, tp)

    def _sync_log(self, lg: PartitionLog, tp: TopicIdPartition | None = None) -> None:
        """Tell a local log what the remote tier holds (local retention and the earliest offset
        follow it)."""
        tp = tp or self.tp_for(lg.topic, lg.partition)
        if tp is None:
            return
        lg.set_remote_offsets(self.rlmm.remote_log_start_offset(tp),
                              self.rlmm.highest_offset(tp))

    # ---- copying ---------------------------------------------------------------------------
    def _next_candidate(self, tp: TopicIdPartition,
                        lg: PartitionLog) -> tuple[int, int] | None:
        """(index, next base) of the next segment to copy: Kafka's rule - a closed segment (not
        the active one) whose records are all below the last stable offset (so below the high
        watermark) and, in Samsa, fsynced (below the recovery point), after the highest offset
        already copied."""
        copied = self.rlmm.highest_offset(tp)
        limit = min(lg.last_stable_offset, lg.high_watermark, lg.flushed_offset)
        segs = lg.segments
        for i in range(len(segs) - 1):
            nxt = segs[i + 1].base
            if nxt - 1 <= copied:
                continue
            if nxt > limit:
                return None
            return i, nxt
        return None

    async def _copy_partition(self, tp: TopicIdPartition, lg: PartitionLog) -> None:
        try:
            while not self._closed and not lg.deleted:
                if self.leader_log(tp.topic, tp.partition) is not lg or not lg.tiered \
                        or lg.config.remote_log_copy_disable:
                    return
                cand = self._next_candidate(tp, lg)
                if cand is None:
                    self._succeeded("copy", tp)
                    return
                await self._copy_segment(tp, lg, *cand)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            self._failed("copy", tp, e)

    def _segment_parts(self, tp: TopicIdPartition, lg: PartitionLog, i: int, nxt: int,
                       sid: uuid.UUID
                       ) -> tuple[RemoteLogSegmentMetadata, Path, Callable[[], LogSegmentData]]:
        """Everything the copy needs, taken on the event loop (cheap: array copies, a hard
        link); the returned builder packs the indexes in the copier thread."""
        seg = lg.segments[i]
        start, end = seg.base, nxt - 1
        epochs: list[tuple[int, int]] = []
        for e, o in lg.epochs.entries:
            if o <= start:
                epochs = [(e, start)]
            elif o <= end:
                epochs.append((e, o))
        aborted = lg.producers.aborted_between(start, nxt)
        txn = b"".join(_TXN.pack(a.producer_id, a.first_offset, a.last_offset,
                                 a.last_stable_offset) for a in aborted) or None
        meta = RemoteLogSegmentMetadata(
            RemoteLogSegmentId(tp, sid), start, end, seg.max_timestamp, self.node_id, now_ms(),
            seg.size, tuple(epochs), S.COPY_SEGMENT_STARTED, None, txn is not None)
        link = seg.log_path.with_name(f"{seg.log_path.name}.{sid.hex}{LINK_SUFFIX}")
        os.link(seg.log_path, link)
        base = seg.base
        idx_off, idx_pos = array("q", seg.idx_off), array("q", seg.idx_pos)
        t_ts, t_off = array("q", seg.t_ts), array("q", seg.t_off)
        snap = lg.dir / f"{nxt:020d}.snapshot"
        epoch_bytes = render(epochs)

        def build() -> LogSegmentData:
            index = b"".join(_IDX.pack(o - base, p) for o, p in zip(idx_off, idx_pos,
                                                                      strict=True))
            tindex = b"".join(_TIDX.pack(t, o - base) for t, o in zip(t_ts, t_off, strict=True))
            try:
                snapshot: bytes | None = snap.read_bytes()
            except OSError:
                snapshot = None
            return LogSegmentData(link, index, tindex, txn, snapshot, epoch_bytes)
        return meta, link, build

    async def _copy_segment(self, tp: TopicIdPartition, lg: PartitionLog, i: int,
                            nxt: int) -> None:
        loop = asyncio.get_running_loop()
        sid = uuid.uuid4()
        meta, link, build = self._segment_parts(tp, lg, i, nxt, sid)
        self._inflight.add(sid)
        published = False
        try:
            await self._copy_quota(meta.segment_size_in_bytes)
            await self.rlmm.add_remote_log_segment_metadata(meta)
            published = True
            _step("copy-started")

            def copy() -> bytes | None:
                return self.rsm.copy_log_segment_data(meta, build())
            custom = await loop.run_in_executor(self.copier, copy)
            _step("copy-uploaded")
            if custom is not None and len(custom) > self.cfg.custom_metadata_max_bytes:
                raise ValueError(f"custom metadata of {len(custom)} bytes is over "
                                 "remote.log.metadata.custom.metadata.max.bytes")
            await self.rlmm.update_remote_log_segment_metadata(RemoteLogSegmentMetadataUpdate(
                meta.segment_id, now_ms(), S.COPY_SEGMENT_FINISHED, self.node_id, custom))
            _step("copy-finished")
            log.info("copied %s [%d, %d] (%d bytes) to the remote store as %s", tp,
                     meta.start_offset, meta.end_offset, meta.segment_size_in_bytes, sid)
        except Exception:
            if published:
                # the half copy goes now if it can; a crash, a cancellation or a failure here
                # leaves it to the expiration pass (COPY_SEGMENT_STARTED, no copy running)
                self._inflight.discard(sid)
                with contextlib.suppress(Exception):
                    cur = self._current(meta)
                    if cur is not None and cur.state == S.COPY_SEGMENT_STARTED:
                        await self._delete_segment(cur)
            raise
        finally:
            self._inflight.discard(sid)
            with contextlib.suppress(OSError):
                link.unlink()

    async def _copy_quota(self, size: int) -> None:
        """remote.log.manager.copy.max.bytes.per.second over this broker's copies: a copy starts
        once the ones before it have used up their share of the rate."""
        rate = self.cfg.copy_max_bytes_per_second
        if rate <= 0 or rate >= 2**62:
            return
        now = time.monotonic()
        start = max(now, self._copy_quota_free_at)
        self._copy_quota_free_at = start + size / rate
        if start > now:
            await asyncio.sleep(start - now)

    def _current(self, meta: RemoteLogSegmentMetadata) -> RemoteLogSegmentMetadata | None:
        st = self.rlmm.partitions.get(meta.tp)
        return None if st is None else st.segments.get(meta.id)

    # ---- deleting --------------------------------------------------------------------------
    async def _delete_segment(self, meta: RemoteLogSegmentMetadata) -> None:
        """DELETE_SEGMENT_STARTED (unless already), the objects, DELETE_SEGMENT_FINISHED."""
        if meta.state != S.DELETE_SEGMENT_STARTED:
            await self.rlmm.update_remote_log_segment_metadata(RemoteLogSegmentMetadataUpdate(
                meta.segment_id, now_ms(), S.DELETE_SEGMENT_STARTED, self.node_id))
        _step("delete-started")
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self.expirer, self.rsm.delete_log_segment_data, meta)
        _step("delete-removed")
        await self.rlmm.update_remote_log_segment_metadata(RemoteLogSegmentMetadataUpdate(
            meta.segment_id, now_ms(), S.DELETE_SEGMENT_FINISHED, self.node_id))
        _step("delete-finished")

    def _expired(self, tp: TopicIdPartition, lg: PartitionLog) -> list[RemoteLogSegmentMetadata]:
        """Readable remote segments to delete, oldest first: below the earliest offset
        (DeleteRecords), past retention.ms, past retention.bytes (the remote bytes plus the local
        bytes not yet copied, Kafka's total size), or all when remote storage was turned off with
        remote.log.delete.on.disable."""
        segs = self.rlmm.segments(tp)
        if not segs:
            return []
        cfg = lg.config
        if not cfg.remote_storage_enable:
            return list(segs) if cfg.remote_log_delete_on_disable else []
        out: list[RemoteLogSegmentMetadata] = []
        floor = lg._global_start
        if floor is not None:
            out += [m for m in segs if m.end_offset < floor]
        if "delete" in cfg.cleanup_policy:
            now = now_ms()
            if cfg.retention_ms >= 0:
                for m in segs:
                    if now - m.max_timestamp_ms <= cfg.retention_ms:
                        break
                    out.append(m)
            if cfg.retention_bytes >= 0:
                highest = max(m.end_offset for m in segs)
                local_only = sum(s.size for s in lg.segments if s.base > highest)
                breach = sum(m.segment_size_in_bytes for m in segs) + local_only \
                    - cfg.retention_bytes
                for m in segs:
                    if breach - m.segment_size_in_bytes < 0:
                        break
                    breach -= m.segment_size_in_bytes
                    out.append(m)
        seen: set[uuid.UUID] = set()
        uniq = []
        for m in sorted(out, key=lambda m: (m.start_offset, m.end_offset)):
            if m.id not in seen:
                seen.add(m.id)
                uniq.append(m)
        return uniq

    def _dangling(self, tp: TopicIdPartition) -> list[RemoteLogSegmentMetadata]:
        """Copies a crash or a failure left in COPY_SEGMENT_STARTED (no copy of them running) and
        deletions left in DELETE_SEGMENT_STARTED."""
        now = now_ms()
        out = []
        for m in self.rlmm.segments_in_state(tp, S.COPY_SEGMENT_STARTED,
                                             S.DELETE_SEGMENT_STARTED):
            if m.id in self._inflight:
                continue
            if (m.state == S.COPY_SEGMENT_STARTED and m.broker_id != self.node_id
                    and now - m.event_timestamp_ms < FOREIGN_DANGLING_MS):
                continue
            out.append(m)
        return out

    async def _expire_partition(self, tp: TopicIdPartition, lg: PartitionLog) -> None:
        try:
            for m in self._dangling(tp):
                log.info("removing %s segment %s of %s [%d, %d] left by an interrupted %s",
                         m.state.name, m.id, tp, m.start_offset, m.end_offset,
                         "copy" if m.state == S.COPY_SEGMENT_STARTED else "deletion")
                await self._delete_segment(m)
            for m in self._expired(tp, lg):
                if self.leader_log(tp.topic, tp.partition) is not lg:
                    return
                # readers stop at the new earliest offset before anything goes
                lg.set_global_log_start_offset(m.end_offset + 1)
                _step("expire-start-moved")
                await self._delete_segment(m)
                log.info("deleted remote segment %s of %s [%d, %d] (retention)", m.id, tp,
                         m.start_offset, m.end_offset)
            self._sync_log(lg, tp)
            self._succeeded("expire", tp)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            self._failed("expire", tp, e)

    async def _delete_removed_partitions(self) -> None:
        """The remote data of partitions whose topic is gone (KIP-405's partition delete:
        DELETE_PARTITION_MARKED, _STARTED, every segment, _FINISHED)."""
        now = time.monotonic()
        for tp in self.rlmm.topic_partitions():
            if self.topic_id(tp.topic) == tp.topic_id:
                self._gone_since.pop(tp, None)
                continue
            # gone for a while, not just unknown to an image that lags the metadata topic
            first = self._gone_since.setdefault(tp, now)
            if now - first < max(2 * self.cfg.task_interval_ms / 1000, GONE_CONFIRM_S):
                continue
            try:
                state = self.rlmm.delete_state(tp)
                for st in (RemotePartitionDeleteState.DELETE_PARTITION_MARKED,
                           RemotePartitionDeleteState.DELETE_PARTITION_STARTED):
                    if state is None or state < st:
                        await self.rlmm.put_remote_partition_delete_metadata(
                            RemotePartitionDeleteMetadata(tp, st, now_ms(), self.node_id))
                for m in self.rlmm.list_remote_log_segments(tp):
                    await self._delete_segment(m)
                await self.rlmm.put_remote_partition_delete_metadata(
                    RemotePartitionDeleteMetadata(
                        tp, RemotePartitionDeleteState.DELETE_PARTITION_FINISHED, now_ms(),
                        self.node_id))
                log.info("deleted the remote data of %s (topic deleted)", tp)
            except Exception as e:
                log.warning("deleting the remote data of %s failed (retried): %s", tp, e)

    async def clean_orphans(self, grace_ms: int = ORPHAN_GRACE_MS) -> int:
        """Delete objects of segments the metadata does not know (a lost metadata write after an
        upload started), in partitions led here or of deleted topics. Returns segments deleted."""
        loop = asyncio.get_running_loop()
        try:
            objs = list(await loop.run_in_executor(self.expirer, self.rsm.list_segments, None))
        except Exception as e:
            log.warning("listing the remote store failed: %s", e)
            return 0
        known = self.rlmm.known_ids()
        now = now_ms()
        n = 0
        for o in objs:
            tp = o.segment_id.tp
            if o.segment_id.id in known or o.segment_id.id in self._inflight:
                continue
            if now - o.modified_ms < grace_ms:
                continue
            gone = self.topic_id(tp.topic) != tp.topic_id
            if not gone and self.leader_log(tp.topic, tp.partition) is None:
                continue
            if not gone and not self.rlmm.replays(tp):
                # no replica of its metadata partition here: this broker cannot know what other
                # brokers copied, so an object unknown here may be another leader's FINISHED copy
                continue
            if gone and not self.cleanup_node():
                continue
            meta = RemoteLogSegmentMetadata(o.segment_id, _start_of(o), -1, -1, self.node_id,
                                            now, o.size, ())
            try:
                await loop.run_in_executor(self.expirer, self.rsm.delete_log_segment_data, meta)
                n += 1
                log.info("deleted orphaned remote segment %s of %s (%d bytes, unknown to %s)",
                         o.segment_id.id, tp, o.size, "__remote_log_metadata")
            except Exception as e:
                log.warning("deleting orphaned remote segment %s failed: %s", o.segment_id.id, e)
        return n


def _start_of(o: Any) -> int:
    """The start offset a store encodes in an object's file names (`<start>-<id>.<part>`; S3
    lists whole keys, so the name is what follows the last `/`)."""
    for name in getattr(o, "files", ()):
        head = name.rsplit("/", 1)[-1].split("-", 1)[0]
        if head.isdigit():
            return int(head)
    return 0


def for_broker(broker: Any) -> RemoteLogManager:
    """Build the remote log manager of a broker (remote.log.storage.system.enable=true): the
    backend from remote.log.storage.manager.class.name, the metadata on its internal topic."""
    from samsa.cluster.forward_append import ForwardingInternalTopic

    from .metadata import TOPIC
    from .rsm import create_rsm

    config = broker.config
    cfg = RemoteLogManagerConfig.from_broker(config.get)
    rsm = create_rsm(cfg.rsm_class, config.values, cfg.rsm_prefix,
                     extra={"broker.id": str(broker.node_id),
                            "log.dirs": ",".join(str(d) for d in config.log_dirs)})
    # tier-ext: in a cluster the leader of a user partition may not lead its metadata
    # partition: such appends are produced to that leader (cluster/forward_append.py)
    topic = ForwardingInternalTopic(broker.controller, broker.logs, TOPIC,
                                    cfg.metadata_partitions,
                                    {"cleanup.policy": "delete",
                                     "retention.ms": str(cfg.metadata_retention_ms),
                                     "retention.bytes": "-1"},
                                    cfg.metadata_replication, node_id=broker.node_id,
                                    endpoint_of=broker.replicas.endpoint_of,
                                    security=lambda: getattr(broker.replicas, "security", None))
    broker._internal_hooks(topic)
    rlmm = RemoteLogMetadataManager(topic, broker.logs)
    install_kill_hook()
    if hasattr(rsm, "hook"):
        rsm.hook = _step  # the store's own steps (log-copying, delete-log-removed)

    def topic_id(name: str) -> uuid.UUID | None:
        t = broker.node.image.topics.get(name)
        return None if t is None else t.topic_id  # type: ignore[no-any-return]

    def cleanup_node() -> bool:
        live = [b.broker_id for b in broker.node.image.live_brokers()]
        return not live or min(live) == broker.node_id

    rlm = RemoteLogManager(cfg, broker.node_id, rsm, rlmm, broker.logs, broker.partition_log,
                           topic_id, cleanup_node)
    rlm.config = config
    broker.replicas.remote_log_manager = rlm  # tier-ext: a follower bootstraps from the remote tier
    return rlm
