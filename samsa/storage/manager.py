"""All partition logs under log.dirs: open/recover on start, create, delete, periodic retention,
flush and log cleaning (compaction), and the clean-shutdown marker that lets the next start skip
recovery."""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
import uuid
from pathlib import Path

from . import fdlimit, fsio
from .cleaner import CleanerConfig, LogCleaner
from .log import HW_CHECKPOINT_MS, LogConfig, PartitionLog

CLEAN_MARKER = ".samsa_clean_shutdown"
log = logging.getLogger("samsa.storage")


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


class LogManager:
    def __init__(self, log_dirs: list[Path], cleaner: CleanerConfig | None = None) -> None:
        self.log_dirs = log_dirs
        self.logs: dict[tuple[str, int], PartitionLog] = {}
        self.clean_start = True
        self._tasks: list[asyncio.Task[None]] = []
        self.cleaner = LogCleaner(cleaner or CleanerConfig(), log_dirs)
        self._fd_budget = fdlimit.configure()
        self.hw_checkpoint_ms = HW_CHECKPOINT_MS  # replica.high.watermark.checkpoint.interval.ms
        # remote.log.storage.system.enable: tiered topics' logs keep local retention rules
        self.remote_system_enabled = False

    def detect_clean(self) -> bool:
        """Was the last shutdown clean? Consumes the marker (a crash from now on is unclean)."""
        clean = True
        for d in self.log_dirs:
            d.mkdir(parents=True, exist_ok=True)
            marker = d / CLEAN_MARKER
            if marker.exists():
                fsio.unlink(marker)
            elif any(p.name != "meta.properties" for p in d.iterdir()):
                clean = False
        self.clean_start = clean
        return clean

    def startup(self, configs: dict[str, LogConfig]) -> None:
        """Open every partition directory found; `configs` maps topic -> its LogConfig."""
        clean = self.clean_start
        for d in self.log_dirs:
            for p in sorted(d.iterdir()):
                if not p.is_dir() or "-" not in p.name:
                    continue
                if p.name.endswith("-delete"):
                    shutil.rmtree(p, ignore_errors=True)
                    continue
                topic, _, part = p.name.rpartition("-")
                if not part.isdigit():
                    continue
                cfg = configs.get(topic)
                if cfg is None:
                    continue  # not in the metadata image: deleted topic, left for cleanup
                t0 = time.monotonic()
                lg = PartitionLog.open(p, topic, int(part), cfg, clean)
                self._watch(lg)
                self.logs[(topic, int(part))] = lg
                if not clean:
                    log.info("recovered %s in %.3fs", p.name, time.monotonic() - t0)
        log.info(fdlimit.describe(*self._fd_budget, partitions=len(self.logs)))

    def _pick_dir(self) -> Path:
        counts = {d: 0 for d in self.log_dirs}
        for lg in self.logs.values():
            for d in counts:
                if lg.dir.parent == d:
                    counts[d] += 1
        return min(counts, key=lambda d: counts[d])

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self.logs.get((topic, partition))

    def create(self, topic: str, partition: int, config: LogConfig) -> PartitionLog:
        existing = self.logs.get((topic, partition))
        if existing is not None:
            return existing
        d = self._pick_dir() / partition_dir_name(topic, partition)
        lg = PartitionLog.open(d, topic, partition, config, clean=True)
        self._watch(lg)
        self.logs[(topic, partition)] = lg
        return lg

    def _watch(self, lg: PartitionLog) -> None:
        """A truncated log's clean/dirty boundary must not stay past its new end (Kafka's
        maybeTruncateCheckpoint): the offsets above it are written again, dirty."""
        lg.remote_system_enabled = self.remote_system_enabled
        def clamp(end: int) -> None:
            cp = self.cleaner.checkpoint(lg)
            if cp is not None and cp > end:
                self.cleaner._set_checkpoint(lg, end)
        lg.truncate_listeners.append(clamp)

    def delete_topic(self, topic: str) -> None:
        for key in [k for k in self.logs if k[0] == topic]:
            self.delete_partition(*key)
        self.cleaner.forget(topic)

    def delete_partition(self, topic: str, partition: int) -> None:
        """Remove one partition's log (its topic was deleted, or its replica moved away)."""
        lg = self.logs.pop((topic, partition), None)
        if lg is None:
            return
        lg.deleted = True
        for s in lg.segments:
            s.close()
        lg._wake()
        # rename first (atomic), remove later: a crash in between leaves a *-delete dir
        target = lg.dir.with_name(f"{lg.dir.name}.{uuid.uuid4().hex}-delete")
        lg.dir.rename(target)
        shutil.rmtree(target, ignore_errors=True)

    def update_config(self, topic: str, config: LogConfig) -> None:
        for (t, _p), lg in self.logs.items():
            if t == topic:
                lg.config = config
                for s in lg.segments:
                    s.index_interval = config.index_interval

    # ---- background work -----------------------------------------------------------------
    def start_background(self, retention_check_ms: int, flush_check_ms: int) -> None:
        self._tasks.append(asyncio.create_task(self._retention_loop(retention_check_ms)))
        self._tasks.append(asyncio.create_task(self._flush_loop(min(flush_check_ms, 1000))))
        if self.cleaner.config.enable:
            self._tasks.append(asyncio.create_task(self.cleaner.run(self.logs)))

    async def _retention_loop(self, interval_ms: int) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            now = int(time.time() * 1000)
            for lg in list(self.logs.values()):
                try:
                    lg.apply_retention(now)
                except Exception:  # one bad partition must not stop retention for the rest
                    log.exception("retention failed for %s-%d", lg.topic, lg.partition)

    async def _flush_loop(self, interval_ms: int) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            for lg in list(self.logs.values()):
                if lg.flush_due and lg.flush_error is None:  # a failed log was reported once
                    try:
                        await lg.flush()
                    except Exception:
                        log.exception("flush failed for %s-%d", lg.topic, lg.partition)
                try:  # a moved high watermark, every replica.high.watermark.checkpoint.interval.ms
                    lg.checkpoint_hw(self.hw_checkpoint_ms)
                except OSError:
                    log.exception("high watermark checkpoint failed for %s-%d", lg.topic,
                                  lg.partition)

    def shutdown(self) -> None:
        for t in self._tasks:
            t.cancel()
        self.cleaner.close()
        failed = set()
        for lg in self.logs.values():
            lg.close(clean=True)
            if lg.flush_error is not None:
                failed.add(lg.dir.parent)  # not synced: the next start must recover it
        # last, once every log is synced: a marker that outlived a power loss must not skip the
        # recovery of data that did not
        for d in self.log_dirs:
            if d in failed:
                continue
            fsio.write_file(d / CLEAN_MARKER, b"", sync=True)
            fsio.fsync_dir(d)
