"""A node's cluster side: the `__cluster_metadata` quorum, the metadata image every node builds
from it, the controller role (active on the quorum leader), and the broker's registration and
heartbeats with the active controller.

Every node, whatever its roles, runs a QuorumDriver (a voter when its node.id is in
`controller.quorum.voters`, an observer otherwise) and applies each committed record to its
MetadataImage, then tells its subscribers (the broker's partition and config reconciliation).
The embedded default (no voters and no bootstrap servers configured) is a combined single-voter
quorum that formats its own storage: the same code, with a quorum of one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from samsa.cluster.metadata import records as rec
from samsa.cluster.metadata.image import MetadataImage
from samsa.cluster.metadata.snapshot import decode_snapshot, encode_snapshot
from samsa.cluster.quorum.config import (
    QuorumConfig,
    QuorumConfigError,
    VoterEndpoint,
    parse_bootstrap_servers,
    parse_voters,
)
from samsa.cluster.quorum.driver import QuorumDriver
from samsa.cluster.quorum.log import Entry, OffsetAndEpoch
from samsa.cluster.quorum.node import NotLeaderError
from samsa.config import BrokerConfig, ConfigError

log = logging.getLogger("samsa.cluster")

LEGACY_STAGING = "__cluster_metadata-0.legacy-migrating"
Subscriber = Callable[[list[rec.Record], bool], None]  # (records, full reload)


class NotControllerError(Exception):
    """This node is not the active controller (NOT_CONTROLLER)."""


def parse_roles(config: BrokerConfig) -> frozenset[str]:
    raw = (config.get("process.roles") or "broker,controller").replace(" ", "")
    roles = frozenset(r for r in raw.split(",") if r)
    bad = roles - {"broker", "controller"}
    if bad or not roles:
        raise ConfigError(f"process.roles: {raw!r} is not a list of 'broker' and/or 'controller'")
    return roles


class ClusterNode:
    """The quorum, the image and the roles of one node (see the module docstring)."""

    def __init__(self, config: BrokerConfig, controller_endpoint: tuple[str, int] | None) -> None:
        self.config = config
        self.node_id = config.node_id
        self.roles = parse_roles(config)
        try:
            voters = parse_voters(config.get("controller.quorum.voters") or "")
            self.bootstrap = parse_bootstrap_servers(
                config.get("controller.quorum.bootstrap.servers") or "")
            self.quorum_config = QuorumConfig.from_properties(config.values)
        except QuorumConfigError as e:
            raise ConfigError(str(e)) from None
        self.embedded = not voters and not self.bootstrap
        if self.embedded:
            if "controller" not in self.roles:
                raise ConfigError("a broker-only node needs controller.quorum.voters or "
                                  "controller.quorum.bootstrap.servers to find the controllers")
            host, port = controller_endpoint or ("127.0.0.1", 0)
            voters = {self.node_id: VoterEndpoint(self.node_id, host, port)}
        if not voters:
            raise ConfigError("controller.quorum.bootstrap.servers without "
                              "controller.quorum.voters needs dynamic voters (KIP-853), which "
                              "Samsa does not implement: list the voters in "
                              "controller.quorum.voters")
        if "controller" in self.roles and self.node_id not in voters:
            raise ConfigError(f"node.id {self.node_id} is a controller (process.roles="
                              f"{config.get('process.roles')}) but is not in "
                              f"controller.quorum.voters ({config.get('controller.quorum.voters')})")
        self.voters = voters
        # how this node dials the controllers' listener (TLS / SASL; docs/security.md)
        from samsa.cluster.node_security import controller_security

        self.security = None if self.embedded else controller_security(config)
        self.image = MetadataImage()
        self.driver: QuorumDriver | None = None
        self.controller: Any = None  # QuorumController when this node has the controller role
        self.active = False  # this node is the active controller and its image is current
        self._leading_epoch = -1  # the epoch in which this node's image became current
        self._activation: asyncio.Task[None] | None = None
        self._subscribers: list[Subscriber] = []
        self._bootstrap_records: list[rec.Record] = []  # migrated legacy metadata
        self._applied = asyncio.Event()
        self._tasks: set[asyncio.Task[Any]] = set()

    # ---- storage ---------------------------------------------------------------------------
    @property
    def metadata_dir(self) -> Path:
        return Path(self.config.get("metadata.log.dir") or self.config.log_dirs[0])

    def prepare_storage(self) -> str:
        """Check (or, embedded, create) meta.properties in every log dir; migrate a legacy
        single-node metadata log. Returns the cluster id."""
        from samsa.cluster import meta_properties as mp

        dirs = [Path(d) for d in self.config.log_dirs]
        if self.metadata_dir not in dirs:
            dirs.append(self.metadata_dir)
        if self.embedded:
            legacy = self._stage_legacy_metadata()
            found = next((m.cluster_id for m in map(mp.read, dirs) if m is not None), None)
            cid = found or (legacy[0] if legacy else None) or \
                self.config.get("cluster.id") or mp.random_uuid()
            if legacy:
                self._bootstrap_records = legacy[1]
            for d in dirs:
                if mp.read(d) is None:
                    mp.write(d, mp.MetaProperties(cid, self.node_id, mp.random_uuid()))
        try:
            cid = mp.check_log_dirs(dirs, self.node_id, None, self.metadata_dir)
        except mp.MetaPropertiesError as e:
            raise ConfigError(str(e)) from None
        self.image.cluster_id = cid
        return cid

    def _stage_legacy_metadata(self) -> tuple[str, list[rec.Record]] | None:
        """A pre-quorum data dir's JSON metadata log is moved to LEGACY_STAGING (same directory,
        rename and directory fsync) and read from there until its records are committed to the
        quorum; only then is it renamed as migrated. A crash anywhere in between finds the staged
        log at the next start and migrates it again."""
        from samsa.cluster.metadata.migrate import legacy_records
        from samsa.storage import fsio

        d = self.metadata_dir
        if not (d / LEGACY_STAGING).exists():
            if (d / "meta.properties").exists() or legacy_records(d, self.node_id) is None:
                return None
            fsio.replace(d / "__cluster_metadata-0", d / LEGACY_STAGING)
            fsio.fsync_dir(d)
        legacy = legacy_records(d, self.node_id, LEGACY_STAGING)
        if legacy is not None:
            log.warning("migrating the single-node metadata log in %s to KRaft records",
                        d / LEGACY_STAGING)
        return legacy

    def _finish_legacy_migration(self) -> None:
        from samsa.storage import fsio

        d = self.metadata_dir
        if (d / LEGACY_STAGING).exists():
            target = d / f"{LEGACY_STAGING}.migrated-{int(time.time())}"
            fsio.replace(d / LEGACY_STAGING, target)
            fsio.fsync_dir(d)
            log.warning("migrated the single-node metadata log; the old log is kept in %s", target)

    # ---- lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        cid = self.image.cluster_id
        self.driver = QuorumDriver(
            self.node_id, self.voters, self.metadata_dir, self.quorum_config, cid,
            on_commit=self._on_commit, on_snapshot=self._on_snapshot,
            take_snapshot=lambda: encode_snapshot(self.image),
            on_leader_change=self._on_leader_change,
            snapshot_bytes=self.config.get_int("metadata.log.max.record.bytes.between.snapshots"),
            security=self.security)
        if "controller" in self.roles:
            from samsa.cluster.controller import QuorumController

            self.controller = QuorumController(self.config, self.image, self.propose,
                                               lambda: int(time.monotonic() * 1000))
        await self.driver.start()

    async def stop(self) -> None:
        for t in list(self._tasks):
            t.cancel()
        if self._activation is not None:
            self._activation.cancel()
        if self.driver is not None:
            await self.driver.stop(resign=True)

    def subscribe(self, fn: Subscriber) -> None:
        self._subscribers.append(fn)

    def spawn(self, coro: Awaitable[Any]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # ---- quorum callbacks ------------------------------------------------------------------
    def _on_commit(self, entries: list[tuple[int, Entry]]) -> None:
        batch: list[rec.Record] = []
        for offset, entry in entries:
            try:
                r = rec.decode(entry.data)
            except rec.MetadataRecordError as e:
                log.error("metadata record at offset %d is unreadable (%s): skipped", offset, e)
                self.image.offset = offset
                continue
            self.image.apply(r, offset)
            batch.append(r)
        self._applied.set()
        self._applied = asyncio.Event()
        for fn in self._subscribers:
            try:
                fn(batch, False)
            except Exception:
                log.exception("metadata subscriber failed")

    def _on_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        cid = self.image.cluster_id
        image = MetadataImage(cluster_id=cid)
        records = decode_snapshot(data)
        for r in records:
            image.apply(r, snapshot_id.offset - 1)
        image.offset = snapshot_id.offset - 1
        self._replace_image(image)
        for fn in self._subscribers:
            try:
                fn(records, True)
            except Exception:
                log.exception("metadata subscriber failed")

    def _replace_image(self, image: MetadataImage) -> None:
        """Keep the one MetadataImage object everyone holds, with new contents."""
        for name in image.__slots__:  # type: ignore[attr-defined]
            setattr(self.image, name, getattr(image, name))

    def _on_leader_change(self, leader_id: int | None, epoch: int) -> None:
        was = self.active
        self.active = False
        if self._activation is not None:
            self._activation.cancel()
            self._activation = None
        if leader_id == self.node_id and self.controller is not None:
            self._activation = asyncio.ensure_future(self._activate(epoch))
        if was:
            log.info("node %d is no longer the active controller (leader %s, epoch %d)",
                     self.node_id, leader_id, epoch)

    async def _activate(self, epoch: int) -> None:
        """Become the active controller once everything before this epoch is applied: commit a
        NoOp first (its commit implies all earlier entries are committed and applied)."""
        try:
            await self.propose([rec.NoOpRecord()], _activating=True)
            self._leading_epoch = epoch
            if self._bootstrap_records:
                todo, self._bootstrap_records = self._bootstrap_records, []
                first = next((r for r in todo if isinstance(r, rec.TopicRecord)), None)
                if first is None or first.topic_id not in self.image.by_id:
                    await self.propose(todo, _activating=True)  # not committed before a crash
                self._finish_legacy_migration()
            await self.controller.activate()
            self.active = True
            log.info("node %d is the active controller (epoch %d)", self.node_id, epoch)
            self.spawn(self._tick_loop(epoch))
        except (NotLeaderError, NotControllerError):
            return
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("controller activation failed")

    async def _tick_loop(self, epoch: int) -> None:
        while self.active and self.driver is not None and self.driver.epoch == epoch:
            try:
                await self.controller.tick()
            except (NotLeaderError, NotControllerError):
                return
            except Exception:
                log.exception("controller tick failed")
            await asyncio.sleep(0.25)

    async def propose(self, records: list[rec.Record], _activating: bool = False) -> int:
        """Append records through the quorum; returns once they are committed and applied."""
        if self.driver is None or not (self.active or _activating
                                       or self._leading_epoch == self.driver.epoch):
            raise NotControllerError()
        try:
            return await self.driver.propose([rec.encode(r) for r in records])
        except NotLeaderError:
            self.active = False
            raise NotControllerError() from None

    # ---- who is who -----------------------------------------------------------------------
    @property
    def leader_id(self) -> int | None:
        return None if self.driver is None else self.driver.leader_id

    def controller_endpoint(self, node_id: int | None = None) -> tuple[str, int] | None:
        """The CONTROLLER listener of the active controller (or of `node_id`)."""
        nid = self.leader_id if node_id is None else node_id
        v = self.voters.get(nid) if nid is not None else None
        return None if v is None else (v.host, v.port)

    async def wait_applied(self, predicate: Callable[[], bool], timeout_s: float) -> bool:
        """Wait until `predicate()` holds on the image (re-checked after each applied batch)."""
        deadline = time.monotonic() + timeout_s
        while not predicate():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._applied.wait(), left)
        return True

    async def wait_caught_up(self, log_every_s: float = 5.0) -> None:
        """Block until the image has every entry committed when we started (the high watermark
        learned from the leader); logs why while the quorum cannot be reached."""
        assert self.driver is not None
        last_log = time.monotonic()
        while True:
            hw = self.driver.high_watermark
            if self.driver.leader_id is not None and hw > 0 and self.driver.delivered_offset >= hw:
                return
            if time.monotonic() - last_log >= log_every_s:
                last_log = time.monotonic()
                log.warning("node %d waiting for the metadata quorum: leader %s, high watermark "
                            "%d, applied up to %d; voters %s", self.node_id,
                            self.driver.leader_id, hw, self.image.offset,
                            ",".join(f"{v.node_id}@{v.host}:{v.port}"
                                     for v in self.voters.values()))
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._applied.wait(), 0.05)

    def random_broker(self) -> int:
        live = self.image.live_brokers()
        return random.choice(live).broker_id if live else -1

    @staticmethod
    def new_incarnation() -> uuid.UUID:
        return uuid.uuid4()
