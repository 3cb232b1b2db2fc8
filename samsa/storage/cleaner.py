"""The log cleaner (compaction of `cleanup.policy=compact` topics), Kafka's LogCleaner on asyncio.

Every `log.cleaner.backoff.ms` the cleaner measures each compacted log's dirty ratio (bytes between
the checkpointed clean/dirty boundary and the first uncleanable offset, over the bytes up to it) and
cleans the filthiest one whose ratio exceeds `min.cleanable.dirty.ratio` (or whose oldest dirty
segment passed `max.compaction.lag.ms`). The uncleanable part is the active segment, any segment
younger than `min.compaction.lag.ms` and anything from the last stable offset (an open
transaction's first offset) on.

The pass itself (cleaner_job.py) runs off the event loop: by default in a child process, so that
per-record parsing never holds the GIL the event loop needs (`samsa.log.cleaner.mode=thread` runs it
in a thread instead). Only the segment swaps run on the event loop, between appends, after checking
that the segments replaced are still the log's (retention, DeleteRecords and topic deletion may run
meanwhile). The clean/dirty boundary is kept in `cleaner-offset-checkpoint` in each log dir (Kafka's
file and format) and written only after the swaps, so a crash can only make the next pass redo work.

Observability: `cleaner-stats.json` in each log dir (last run, counters, each partition's dirty ratio)
is rewritten when it changes; `samsa log cleaner --log-dirs DIR` prints it.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import multiprocessing
import os
import signal
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from . import cleaner_job, fsio
from .cleaner_job import (
    CleaningAborted,
    CleanJob,
    CorruptSegment,
    GroupResult,
    Plan,
    Prepared,
    SegInfo,
    Stats,
)
from .log import CLEANED, PartitionLog
from .segment import segment_name

CHECKPOINT = "cleaner-offset-checkpoint"
STATS_FILE = "cleaner-stats.json"
log = logging.getLogger("samsa.cleaner")

Key = tuple[str, int]


@dataclass
class CleanerConfig:
    enable: bool = True  # log.cleaner.enable
    backoff_ms: int = 15000  # log.cleaner.backoff.ms
    dedupe_buffer_size: int = 128 << 20  # log.cleaner.dedupe.buffer.size
    load_factor: float = 0.9  # log.cleaner.io.buffer.load.factor
    io_buffer_size: int = 512 << 10  # log.cleaner.io.buffer.size
    io_max_bytes_per_second: float = float("inf")  # log.cleaner.io.max.bytes.per.second
    producer_id_expiration_ms: int = 86400000  # producer.id.expiration.ms
    mode: str = "process"  # samsa.log.cleaner.mode: process | thread | inline (tests)

    @classmethod
    def from_broker(cls, get: Callable[[str], str | None]) -> CleanerConfig:
        d = cls()

        def val(name: str, default: object) -> str:
            v = get(name)
            return str(default) if v is None else v

        return cls(
            enable=val("log.cleaner.enable", "true").lower() == "true",
            backoff_ms=int(val("log.cleaner.backoff.ms", d.backoff_ms)),
            dedupe_buffer_size=int(val("log.cleaner.dedupe.buffer.size", d.dedupe_buffer_size)),
            load_factor=float(val("log.cleaner.io.buffer.load.factor", d.load_factor)),
            io_buffer_size=int(val("log.cleaner.io.buffer.size", d.io_buffer_size)),
            io_max_bytes_per_second=float(val("log.cleaner.io.max.bytes.per.second",
                                              d.io_max_bytes_per_second)),
            producer_id_expiration_ms=int(val("producer.id.expiration.ms",
                                              d.producer_id_expiration_ms)),
            mode=val("samsa.log.cleaner.mode", d.mode),
        )


@dataclass
class ToClean:
    """A compacted log's cleanable range and its dirty ratio (Kafka's LogToClean)."""

    log: PartitionLog
    first_dirty: int
    first_uncleanable: int
    clean_bytes: int
    cleanable_bytes: int
    need_now: bool  # max.compaction.lag.ms passed for its oldest dirty segment

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0

    @property
    def cleanable(self) -> bool:
        return self.total_bytes > 0 and (
            (self.need_now and self.cleanable_bytes > 0)
            or self.ratio > self.log.config.min_cleanable_ratio)


@dataclass
class RunStats:
    partition: str
    started_ms: int
    first_dirty: int
    end_offset: int = -1
    duration_s: float = 0.0
    dirty_bytes: int = 0  # cleanable bytes when the pass started
    segments_in: int = 0
    segments_out: int = 0
    map_entries: int = 0
    outcome: str = "running"
    stats: Stats = field(default_factory=Stats)

    @property
    def dirty_mb_per_s(self) -> float:
        return self.dirty_bytes / 1e6 / self.duration_s if self.duration_s > 0 else 0.0


# ---- where passes run ------------------------------------------------------------------------
class _LocalWorker:
    """Runs passes in a thread of this process (or inline, on the event loop, for tests)."""

    def __init__(self, threaded: bool) -> None:
        self.threaded = threaded
        self.jobs: dict[int, CleanJob] = {}
        self.stopping = threading.Event()

    async def _run(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.to_thread(fn, *args) if self.threaded else fn(*args)

    async def prepare(self, job_id: int, plan: Plan) -> Prepared:
        job = CleanJob(plan, self.stopping.is_set)
        self.jobs[job_id] = job
        return await self._run(job.prepare)  # type: ignore[no-any-return]

    async def clean_group(self, job_id: int, index: int) -> GroupResult:
        return await self._run(self.jobs[job_id].clean_group, index)  # type: ignore[no-any-return]

    async def drop(self, job_id: int) -> None:
        self.jobs.pop(job_id, None)

    def close(self) -> None:
        self.stopping.set()


def _worker_main(conn: Connection, parent_pid: int) -> None:
    """The cleaner process: runs cleaner_job functions sent by the broker, one at a time, at a
    lower scheduling priority (nice 10). It dies with the broker (PR_SET_PDEATHSIG, and a parent
    check between chunks) so a crashed broker never leaves a process writing `.cleaned` files
    under its restarted successor."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:  # background work: the broker's event loop gets the CPU first when it is contended
        os.nice(10)
    except OSError:
        pass
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass
    if os.getppid() != parent_pid:
        return
    cleaner_job.stop_check = lambda: os.getppid() != parent_pid
    calls: dict[str, Callable[..., Any]] = {
        "prepare": cleaner_job.job_prepare, "clean_group": cleaner_job.job_clean_group,
        "drop": cleaner_job.job_drop}
    while True:
        try:
            rid, name, args = conn.recv()
        except (EOFError, OSError):
            return
        try:
            conn.send((rid, True, calls[name](*args)))
        except Exception as e:
            conn.send((rid, False, (type(e).__name__, str(e), traceback.format_exc())))


class _ProcessWorker:
    """Runs passes in a child process (spawned on first use, respawned if it dies)."""

    _ERRORS: dict[str, type[Exception]] = {"CorruptSegment": CorruptSegment,
                                           "CleaningAborted": CleaningAborted,
                                           "FileNotFoundError": FileNotFoundError}

    def __init__(self) -> None:
        self.proc: Any = None
        self.conn: Connection | None = None
        self.ids = itertools.count()

    def _start(self) -> Connection:
        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_main, args=(child, os.getpid()), daemon=True,
                                name="samsa-log-cleaner")
        self.proc.start()
        child.close()
        self.conn = parent
        return parent

    async def _call(self, name: str, *args: Any) -> Any:
        conn = self.conn
        if conn is None or self.proc is None or not self.proc.is_alive():
            self.close()
            conn = self._start()
        rid = next(self.ids)
        conn.send((rid, name, args))
        try:
            while True:
                got, ok, value = await asyncio.to_thread(conn.recv)
                if got == rid:
                    break
        except asyncio.CancelledError:
            self.close()  # the reply would arrive for nobody: start afresh next time
            raise
        except (EOFError, OSError) as e:
            self.close()
            raise CleaningAborted(f"cleaner process exited: {e}") from None
        if not ok:
            kind, msg, tb = value
            err = self._ERRORS.get(kind)
            if err is not None:
                raise err(msg)
            raise RuntimeError(f"{kind}: {msg}\n{tb}")
        return value

    async def prepare(self, job_id: int, plan: Plan) -> Prepared:
        return await self._call("prepare", job_id, plan)  # type: ignore[no-any-return]

    async def clean_group(self, job_id: int, index: int) -> GroupResult:
        return await self._call("clean_group", job_id, index)  # type: ignore[no-any-return]

    async def drop(self, job_id: int) -> None:
        if self.conn is not None:
            await self._call("drop", job_id)

    def close(self) -> None:
        if self.proc is not None:
            if self.proc.is_alive():
                self.proc.kill()
            self.proc.join(5)
        if self.conn is not None:
            self.conn.close()
        self.proc = None
        self.conn = None


# ---- the cleaner -----------------------------------------------------------------------------
class LogCleaner:
    def __init__(self, config: CleanerConfig, log_dirs: list[Path]) -> None:
        self.config = config
        self.log_dirs = log_dirs
        self.worker: _LocalWorker | _ProcessWorker = (
            _ProcessWorker() if config.mode == "process" else _LocalWorker(config.mode == "thread"))
        self.checkpoints: dict[Path, dict[Key, int]] = {d: self._read_checkpoint(d) for d in log_dirs}
        self.uncleanable: set[Key] = set()
        self._stuck: dict[Key, int] = {}  # no progress possible until the log end moves
        self._job_ids = itertools.count(1)
        self.totals = Stats()
        self.runs = 0
        self.aborted = 0
        self.time_spent_s = 0.0
        self.last_run: RunStats | None = None
        self.partitions: dict[Key, dict[str, Any]] = {}
        self.last_cleaned_ms: dict[Key, int] = {}
        self._stats_written: dict[Path, str] = {}

    # ---- checkpoint --------------------------------------------------------------------------
    @staticmethod
    def _read_checkpoint(d: Path) -> dict[Key, int]:
        """Kafka's offset checkpoint format: version line, count line, `topic partition offset`."""
        try:
            lines = (d / CHECKPOINT).read_text().splitlines()
            out = {}
            for line in lines[2 : 2 + int(lines[1])]:
                topic, part, off = line.rsplit(" ", 2)
                out[(topic, int(part))] = int(off)
            return out
        except FileNotFoundError:
            return {}
        except (ValueError, IndexError):
            log.warning("ignoring unreadable %s in %s", CHECKPOINT, d)
            return {}

    def _write_checkpoint(self, d: Path) -> None:
        entries = self.checkpoints.get(d, {})
        text = f"0\n{len(entries)}\n" + "".join(f"{t} {p} {o}\n" for (t, p), o in
                                                 sorted(entries.items()))
        fsio.replace_file(d / CHECKPOINT, text.encode(), sync=False)

    def checkpoint(self, lg: PartitionLog) -> int | None:
        return self.checkpoints.get(lg.dir.parent, {}).get((lg.topic, lg.partition))

    def _set_checkpoint(self, lg: PartitionLog, offset: int) -> None:
        self.checkpoints.setdefault(lg.dir.parent, {})[(lg.topic, lg.partition)] = offset
        self._write_checkpoint(lg.dir.parent)

    def forget(self, topic: str) -> None:
        """A deleted topic's partitions leave the checkpoint (a new topic of that name starts
        dirty)."""
        for d, entries in self.checkpoints.items():
            gone = [k for k in entries if k[0] == topic]
            for k in gone:
                del entries[k]
                self.uncleanable.discard(k)
                self.partitions.pop(k, None)
            if gone:
                self._write_checkpoint(d)

    # ---- choosing ----------------------------------------------------------------------------
    def to_clean(self, lg: PartitionLog, now_ms: int) -> ToClean:
        cfg = lg.config
        segs = lg.segments
        first_dirty = self.checkpoint(lg)
        if first_dirty is None or not lg.log_start_offset <= first_dirty <= lg.end_offset:
            first_dirty = lg.log_start_offset
        # the active segment and anything from an open transaction on (the segment holding the last
        # stable offset) are never cleaned
        lso = lg.last_stable_offset
        uncleanable = min(lg.active.base, segs[max(lg._segment_index(lso), 0)].base)
        # nor anything not yet fsynced: a record the cleaner drops must not depend on a later one
        # that a power loss could still take away (with flush.messages=1 the earlier one was
        # acknowledged as durable)
        uncleanable = min(uncleanable, segs[lg._segment_index(lg.flushed_offset)].base)
        dirty_closed = [s for i, s in enumerate(segs[:-1]) if segs[i + 1].base > first_dirty]
        if cfg.min_compaction_lag_ms > 0:
            for s in dirty_closed:
                if s.max_timestamp > now_ms - cfg.min_compaction_lag_ms:
                    uncleanable = min(uncleanable, s.base)
                    break
        uncleanable = max(uncleanable, first_dirty)
        # the uncleanable offset's segment bounds what is cleaned (Kafka counts whole segments)
        fuo = max((s.base for s in segs if s.base <= uncleanable), default=uncleanable)
        lo = min(first_dirty, fuo)
        clean = cleanable = 0
        for i, s in enumerate(segs):
            nxt = segs[i + 1].base if i + 1 < len(segs) else lg.end_offset + 1
            if s.base < first_dirty:
                clean += s.size
            if s.base < fuo and nxt > lo:
                cleanable += s.size
        need_now = False
        if cfg.max_compaction_lag_ms < 2**63 - 1:
            stamps = [s.first_timestamp for s in dirty_closed
                      if s.first_timestamp is not None and s.first_timestamp > 0]
            need_now = bool(stamps) and min(stamps) < now_ms - max(cfg.max_compaction_lag_ms, 0)
        return ToClean(lg, first_dirty, fuo, clean, cleanable, need_now)

    def _survey(self, logs: dict[Key, PartitionLog], now_ms: int) -> list[ToClean]:
        out = []
        for key, lg in list(logs.items()):
            if not lg.config.compact or lg.deleted:
                self.partitions.pop(key, None)
                continue
            tc = self.to_clean(lg, now_ms)
            self._describe(key, tc)
            if key in self.uncleanable or self._stuck.get(key) == lg.end_offset:
                continue
            out.append(tc)
        return out

    def _describe(self, key: Key, tc: ToClean) -> None:
        lg = tc.log
        self.partitions[key] = {
            "dirty_ratio": round(tc.ratio, 4), "first_dirty_offset": tc.first_dirty,
            "first_uncleanable_offset": tc.first_uncleanable, "clean_bytes": tc.clean_bytes,
            "cleanable_bytes": tc.cleanable_bytes, "log_start_offset": lg.log_start_offset,
            "log_end_offset": lg.end_offset, "min_cleanable_ratio": lg.config.min_cleanable_ratio,
            "last_cleaned_ms": self.last_cleaned_ms.get(key), "uncleanable": key in self.uncleanable}

    async def clean_once(self, logs: dict[Key, PartitionLog], now_ms: int | None = None) -> bool:
        """Clean the filthiest cleanable log, if any. True when a pass made progress."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        candidates = [tc for tc in self._survey(logs, now) if tc.cleanable]
        if not candidates:
            return False
        best = max(candidates, key=lambda tc: tc.ratio)
        return await self.clean(best, now, logs)

    # ---- cleaning ----------------------------------------------------------------------------
    def _plan(self, tc: ToClean, now_ms: int) -> Plan:
        lg = tc.log
        cfg = lg.config
        segs = lg.segments
        i = max(lg._segment_index(tc.first_dirty), 0)
        pos = segs[i].position_of(tc.first_dirty)
        expiry = self.config.producer_id_expiration_ms
        producers = {pid: (e.batches[-1].last_offset if e.batches else -1, e.epoch)
                     for pid, e in lg.producers.producers.items()
                     if e.txn_first_offset >= 0 or now_ms - e.last_timestamp < expiry}
        aborted = [(a.first_offset, a.producer_id, a.last_offset)
                   for a in lg.producers.aborted_between(0, tc.first_uncleanable)]
        return Plan(
            name=lg.dir.name, dir=str(lg.dir),
            segments=[SegInfo(s.base, str(s.log_path), s.size, len(s.idx_pos) * 8, len(s.t_ts) * 12)
                      for s in segs],
            log_start=lg.log_start_offset, first_dirty=tc.first_dirty,
            dirty_pos=segs[i].size if pos is None else pos,
            first_uncleanable=tc.first_uncleanable, now_ms=now_ms,
            delete_retention_ms=cfg.delete_retention_ms, segment_bytes=cfg.segment_bytes,
            index_interval=cfg.index_interval, max_message_bytes=cfg.max_message_bytes,
            producers=producers, aborted=aborted,
            dedupe_buffer_size=self.config.dedupe_buffer_size, load_factor=self.config.load_factor,
            io_buffer_size=self.config.io_buffer_size,
            io_max_bytes_per_second=self.config.io_max_bytes_per_second)

    async def clean(self, tc: ToClean, now_ms: int, logs: dict[Key, PartitionLog]) -> bool:
        lg = tc.log
        key = (lg.topic, lg.partition)

        def gone() -> bool:
            return lg.deleted or logs.get(key) is not lg

        segs = list(lg.segments)
        plan = self._plan(tc, now_ms)
        job = next(self._job_ids)
        run = RunStats(partition=lg.dir.name, started_ms=int(time.time() * 1000),
                       first_dirty=tc.first_dirty, dirty_bytes=tc.cleanable_bytes)
        self.last_run = run
        t0 = time.monotonic()
        progress = False
        log.info("Cleaning %s: offsets [%d, %d), dirty ratio %.3f (%d of %d bytes)", lg.dir.name,
                 tc.first_dirty, tc.first_uncleanable, tc.ratio, tc.cleanable_bytes, tc.total_bytes)
        try:
            prep = await self.worker.prepare(job, plan)
            run.stats.add(prep.stats)
            run.map_entries = prep.map_entries
            run.end_offset = prep.end_offset
            for gi, group in enumerate(prep.groups):
                if gone():
                    raise CleaningAborted("log deleted")
                res = await self.worker.clean_group(job, gi)
                run.stats.add(res.stats)
                old = [segs[i] for i in group]
                if gone() or not lg.replace_segments(old):
                    _remove_cleaned(lg.dir, old[0].base)
                    raise CleaningAborted("segments changed under the cleaner")
                if res.emptied_aborts:
                    lg.producers.forget_aborted(set(res.emptied_aborts))
                progress = True
                run.segments_in += len(old)
                run.segments_out += 1
                if self.config.mode == "inline":
                    fsio.fsync_dir(lg.dir)
                else:
                    await asyncio.to_thread(fsio.fsync_dir, lg.dir)
            if not gone():
                if prep.end_offset > tc.first_dirty:
                    progress = True
                    self._set_checkpoint(lg, prep.end_offset)
                self.last_cleaned_ms[key] = int(time.time() * 1000)
            run.outcome = "done"
        except CleaningAborted as e:
            run.outcome = f"aborted: {e}"
            self.aborted += 1
            log.info("Cleaning %s aborted: %s", lg.dir.name, e)
        except FileNotFoundError as e:  # a segment went away (retention) while being read
            run.outcome = f"aborted: {e}"
            self.aborted += 1
            log.info("Cleaning %s aborted: %s", lg.dir.name, e)
        except CorruptSegment as e:
            run.outcome = f"uncleanable: {e}"
            self.uncleanable.add(key)
            log.error("Cleaning %s stopped, partition marked uncleanable: %s", lg.dir.name, e)
        except asyncio.CancelledError:
            run.outcome = "cancelled"
            raise
        except Exception as e:
            run.outcome = f"uncleanable: {e}"
            self.uncleanable.add(key)
            log.exception("Cleaning %s failed, partition marked uncleanable", lg.dir.name)
        finally:
            run.duration_s = time.monotonic() - t0
            self.time_spent_s += run.duration_s
            self.runs += 1
            self.totals.add(run.stats)
            if run.outcome != "cancelled":
                try:
                    await self.worker.drop(job)
                except Exception:
                    pass
        if not progress:
            self._stuck[key] = lg.end_offset
        else:
            self._stuck.pop(key, None)
        if not gone():
            self._describe(key, self.to_clean(lg, now_ms))
        if run.outcome == "done":
            s = run.stats
            log.info("Cleaned %s in %.2fs: %d segments -> %d, %.1f MB dirty at %.1f MB/s, read %.1f MB, "
                     "wrote %.1f MB, kept %d of %d records; first dirty offset now %d",
                     lg.dir.name, run.duration_s, run.segments_in, run.segments_out,
                     run.dirty_bytes / 1e6, run.dirty_mb_per_s, (s.bytes_read + s.map_bytes_read) / 1e6,
                     s.bytes_written / 1e6, s.records_retained, s.records_read, run.end_offset)
        return progress

    # ---- background loop -------------------------------------------------------------------
    async def run(self, logs: dict[Key, PartitionLog]) -> None:
        """Clean until cancelled, backing off `log.cleaner.backoff.ms` when nothing is cleanable."""
        while True:
            try:
                cleaned = await self.clean_once(logs)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("log cleaner iteration failed")
                cleaned = False
            try:
                self.write_stats(logs)
            except OSError:
                log.exception("cannot write %s", STATS_FILE)
            if not cleaned:
                await asyncio.sleep(self.config.backoff_ms / 1000)

    def metrics(self) -> dict[str, Any]:
        t = self.totals
        return {"runs": self.runs, "aborted": self.aborted, "time_spent_s": round(self.time_spent_s, 3),
                "bytes_read": t.bytes_read + t.map_bytes_read, "bytes_written": t.bytes_written,
                "records_read": t.records_read, "records_retained": t.records_retained,
                "invalid_records": t.invalid_records, "uncleanable_partitions": len(self.uncleanable)}

    def write_stats(self, logs: dict[Key, PartitionLog]) -> None:
        """cleaner-stats.json in each log dir: counters, the last run and that dir's partitions."""
        last = None
        if self.last_run is not None:
            r = self.last_run
            last = {**{k: v for k, v in asdict(r).items() if k != "stats"}, **asdict(r.stats),
                    "dirty_mb_per_s": round(r.dirty_mb_per_s, 3)}
        for d in self.log_dirs:
            parts = {f"{t}-{p}": v for (t, p), v in sorted(self.partitions.items())
                     if (lg := logs.get((t, p))) is not None and lg.dir.parent == d}
            body = {"enabled": self.config.enable, "mode": self.config.mode,
                    "backoff_ms": self.config.backoff_ms, "metrics": self.metrics(), "last_run": last,
                    "partitions": parts}
            text = json.dumps(body, indent=1, sort_keys=True)
            if self._stats_written.get(d) == text:
                continue
            body["updated_ms"] = int(time.time() * 1000)
            tmp = d / (STATS_FILE + ".tmp")
            tmp.write_text(json.dumps(body, indent=1, sort_keys=True))
            os.replace(tmp, d / STATS_FILE)
            self._stats_written[d] = text

    def close(self) -> None:
        self.worker.close()


def _remove_cleaned(directory: Path, base: int) -> None:
    for ext in (".log", ".index", ".timeindex"):
        fsio.unlink(directory / f"{segment_name(base)}{ext}{CLEANED}")
