"""The CDC task: sets up the publication and slot, takes the initial snapshot inside the slot's
exported snapshot, then streams pgoutput and turns each change into Debezium's events.

Offsets. Source partition {"server": topic.prefix}; each record's offset names its transaction's
commit LSN (`lsn_commit`), the event's LSN (`lsn`), txId, ts_usec and `txn_event`, the count of
records of that transaction emitted up to and including this one. The slot's position is
confirmed to PostgreSQL (standby status update, flush LSN) only from `commit()`, which the runtime
calls after the offsets of everything polled so far were written (or, with exactly-once source
support, after the transaction that holds those records and offsets committed). After a restart
PostgreSQL resends every transaction after the confirmed position; the task drops transactions
whose commit LSN is below the stored `lsn_commit` and the first `txn_event` records of the one at
it, so nothing is missed, and nothing repeats once records and offsets are written atomically.

Threads: poll/commit/commit_record run on the task's thread; stop() takes the same lock, so the
psycopg2 connections are never used by two threads at once."""

from __future__ import annotations

import logging
import select
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import psycopg2

from ...api import SourceTask
from ...data import Schema, SourceRecord, Struct
from ...errors import ConnectException
from .._util import Stopper
from . import events as ev
from .config import CdcConfig, parse_config
from .db import Catalog, connect, quote_ident, raw_strings
from .db import is_retriable as _retriable
from .pgoutput import Begin, Change, Commit, Relation, Truncate, TypeInfo, decode, lsn_text, parse_lsn
from .types import Modes, PgType, TypeMapper

log = logging.getLogger("samsa.connect.connectors.postgres_cdc")

SERVER = "server"
SKIP_ALL = 1 << 62


@dataclass
class _Txn:
    xid: int
    commit_lsn: int
    ts_us: int
    skip: int  # records of this transaction already emitted by an earlier run
    emitted: int = 0  # records produced for this transaction so far (skipped ones included)
    data_events: int = 0
    per_table: dict[str, int] = field(default_factory=dict)
    begin_sent: bool = False

    @property
    def id(self) -> str:
        return f"{self.xid}:{self.commit_lsn}"


@dataclass
class _Pending:
    record: SourceRecord
    confirm: int | None = None  # LSN safe to confirm once this record is committed


class _Snapshot:
    """Reads the captured tables inside one REPEATABLE READ transaction (the slot's exported
    snapshot), a batch at a time, one row held back so the last record can say so."""

    def __init__(self, conn: Any, tables: list[tuple[ev.TableSchema, list[str]]], lsn: int,
                 txid: int | None, batch: int) -> None:
        self.conn = conn
        self.tables = tables
        self.lsn = lsn
        self.txid = txid
        self.batch = batch
        self.index = -1
        self.cursor: Any = None
        self.held: tuple[ev.TableSchema, tuple[Any, ...]] | None = None
        self.ts_us = time.time_ns() // 1000
        self.done = False

    def _next_rows(self) -> tuple[ev.TableSchema, list[tuple[Any, ...]]] | None:
        while True:
            if self.cursor is not None:
                rows = self.cursor.fetchmany(self.batch)
                if rows:
                    return self.tables[self.index][0], rows
                self.cursor.close()
                self.cursor = None
            self.index += 1
            if self.index >= len(self.tables):
                return None
            table, cols = self.tables[self.index]
            self.cursor = self.conn.cursor(name=f"samsa_snapshot_{self.index}")
            self.cursor.itersize = self.batch
            select_list = ", ".join(quote_ident(c) for c in cols) or "1"
            self.cursor.execute(f"SELECT {select_list} FROM {quote_ident(table.schema_name)}."
                                f"{quote_ident(table.table)}")

    def rows(self) -> list[tuple[ev.TableSchema, tuple[Any, ...], bool]]:
        """The next rows with a flag on the very last one of the snapshot."""
        out: list[tuple[ev.TableSchema, tuple[Any, ...], bool]] = []
        got = self._next_rows()
        if got is None:
            if self.held is not None:
                out.append((self.held[0], self.held[1], True))
                self.held = None
            self.done = True
            return out
        table, rows = got
        if self.held is not None:
            out.append((self.held[0], self.held[1], False))
        out.extend((table, r, False) for r in rows[:-1])
        self.held = (table, rows[-1])
        return out


class PostgresConnectorTask(SourceTask):
    select_slice_s = 0.1

    def __init__(self) -> None:
        self.cfg: CdcConfig | None = None
        self._lock = threading.Lock()
        self._stopper = Stopper()
        self._catalog: Catalog | None = None
        self._repl: Any = None  # the replication connection
        self._cursor: Any = None  # its cursor, streaming once _phase == "stream"
        self._snap_conn: Any = None
        self._snapshot: _Snapshot | None = None
        self._phase = "init"  # init | snapshot | stream | idle
        self._offset: dict[str, Any] | None = None  # of the last record handed out by poll
        self._offset_loaded = False
        self._resume_commit = -1
        self._resume_events = 0
        self._types: dict[int, PgType] = {}
        self._mapper: TypeMapper | None = None
        self._relations: dict[int, ev.TableSchema | None] = {}
        self._txn: _Txn | None = None
        self._pending: deque[_Pending] = deque()
        self._polled_confirm = 0  # confirmable once everything polled so far is committed
        self._committed_confirm = 0  # ... and commit() said it is
        self._confirmed = 0  # sent to PostgreSQL
        self._last_commit_lsn: int | None = None
        self._last_end_lsn = 0
        self._last_heartbeat = time.monotonic()
        self._partition: dict[str, Any] = {}

    # ---- life cycle -----------------------------------------------------------------------
    def start(self, props: dict[str, str]) -> None:
        self.cfg = parse_config(props)
        self._partition = {SERVER: self.cfg.prefix}
        c = self.cfg
        self._modes = Modes(c.decimal_mode, c.time_precision, c.binary_mode)
        log.info("PostgreSQL CDC task for %s@%s:%s/%s (slot %s, publication %s, snapshot.mode %s)",
                 c.user, c.host, c.port, c.dbname, c.slot, c.publication, c.snapshot_mode)

    def stop(self) -> None:
        self._stopper.stop()
        with self._lock:
            try:
                self._send_confirm(self._committed_confirm)  # only what commit() vouched for
            except psycopg2.Error:
                pass
            self._close_all()
            cfg = self.cfg
            if cfg is not None and cfg.drop_slot_on_stop:
                try:
                    cat = Catalog(cfg)
                    try:
                        if cat.slot() is not None:
                            cat.drop_slot()
                            log.info("Dropped replication slot %s (slot.drop.on.stop)", cfg.slot)
                    finally:
                        cat.close()
                except psycopg2.Error as e:
                    log.warning("Could not drop slot %s: %s", cfg.slot, e)

    def _close_all(self) -> None:
        for conn in (self._snap_conn, self._repl):
            if conn is not None:
                try:
                    conn.close()
                except psycopg2.Error:
                    pass
        if self._catalog is not None:
            self._catalog.close()
        self._snap_conn = self._repl = self._cursor = self._catalog = None
        self._snapshot = None
        self._txn = None
        self._pending.clear()
        self._relations.clear()
        self._phase = "init"

    # ---- the runtime's calls -----------------------------------------------------------------
    def poll(self) -> list[SourceRecord] | None:
        if self._stopper.stopped:
            return None
        try:
            with self._lock:
                if self._stopper.stopped:
                    return None
                return self._poll()
        except ConnectException:
            with self._lock:
                self._close_all()  # a failed task must not keep holding the slot
            raise
        except psycopg2.Error as e:
            if not _retriable(e):
                with self._lock:
                    self._close_all()
                raise ConnectException(f"PostgreSQL error: {e}".strip()) from e
            assert self.cfg is not None
            log.warning("PostgreSQL connection failed (%s); reconnecting in %.1f s",
                        str(e).strip(), self.cfg.retry_delay_s)
            with self._lock:
                self._close_all()
            self._stopper.wait(self.cfg.retry_delay_s)
            return None

    def commit(self) -> None:
        """Everything polled so far is committed to Samsa: confirm the slot up to it."""
        with self._lock:
            self._committed_confirm = max(self._committed_confirm, self._polled_confirm)
            try:
                self._send_confirm(self._committed_confirm)
            except psycopg2.Error as e:
                log.warning("Standby status update failed (%s); the next commit retries", e)

    def _send_confirm(self, lsn: int) -> None:
        if self._cursor is None or self._phase != "stream" or lsn <= self._confirmed:
            return
        self._cursor.send_feedback(write_lsn=lsn, flush_lsn=lsn, apply_lsn=lsn, force=True)
        self._confirmed = lsn
        log.debug("Confirmed LSN %s to slot", lsn_text(lsn))

    # ---- setting up -------------------------------------------------------------------------
    def _load_offset(self) -> None:
        if self._offset_loaded:
            return
        self._offset_loaded = True
        stored = self.context.offset_storage_reader.offset(self._partition)
        self._offset = dict(stored) if stored else None

    def _snapshot_complete(self) -> bool:
        off = self._offset
        return off is not None and not (off.get("snapshot") and not off.get("last_snapshot_record"))

    def _setup(self) -> None:
        cfg = self.cfg
        assert cfg is not None
        self._load_offset()
        cat = self._catalog = Catalog(cfg)
        cat.check_wal_level()
        cat.ensure_publication()
        self._types = cat.types()
        self._mapper = TypeMapper(self._types, self._modes)
        done = self._snapshot_complete()
        mode = cfg.snapshot_mode
        slot = cat.slot()
        if slot is not None and slot.plugin != "pgoutput":
            raise ConnectException(f"Replication slot '{cfg.slot}' uses plugin {slot.plugin}; "
                                   "this connector needs a pgoutput slot")
        if slot is not None and slot.database != cfg.dbname:
            raise ConnectException(f"Replication slot '{cfg.slot}' belongs to database "
                                   f"'{slot.database}', not '{cfg.dbname}'")
        if mode == "initial_only":
            if done:
                self._phase = "idle"
                return
            self._begin_snapshot(exported=None)
            return
        need_snapshot = (mode == "initial" and not done) or \
            (mode == "when_needed" and (not done or slot is None))
        if slot is None and self._offset is not None and done and not need_snapshot:
            lsn = self._offset.get("lsn_commit", self._offset.get("lsn"))
            raise ConnectException(
                f"Replication slot '{cfg.slot}' does not exist, but the connector has already "
                f"streamed changes up to LSN {lsn_text(int(lsn)) if lsn is not None else '?'}: "
                "the changes since then are gone with the slot. Delete the connector's offsets "
                "(or use a new connector name) to start over, or set snapshot.mode=when_needed "
                "to take a new snapshot")
        self._repl = connect(cfg, replication=True)
        self._cursor = self._repl.cursor()
        if need_snapshot:
            if slot is not None:
                log.info("Dropping replication slot %s to take a snapshot consistent with a new "
                         "one", cfg.slot)
                cat.drop_slot()
            self._cursor.execute(f"CREATE_REPLICATION_SLOT {quote_ident(cfg.slot)} LOGICAL "
                                 "pgoutput EXPORT_SNAPSHOT")
            _, consistent, snapshot_name, _ = self._cursor.fetchone()
            log.info("Created slot %s at %s with exported snapshot %s", cfg.slot, consistent,
                     snapshot_name)
            self._offset = None
            self._begin_snapshot(exported=(snapshot_name, parse_lsn(consistent)))
            return
        if slot is None:
            self._cursor.execute(f"CREATE_REPLICATION_SLOT {quote_ident(cfg.slot)} LOGICAL "
                                 "pgoutput NOEXPORT_SNAPSHOT")
            _, consistent, _, _ = self._cursor.fetchone()
            log.info("Created slot %s at %s (snapshot.mode=%s: no snapshot)", cfg.slot,
                     consistent, mode)
        self._start_stream()

    def _begin_snapshot(self, exported: tuple[str, int] | None) -> None:
        cfg = self.cfg
        assert cfg is not None and self._catalog is not None
        conn = self._snap_conn = connect(cfg)
        raw_strings(conn)
        conn.set_session(isolation_level=psycopg2.extensions.ISOLATION_LEVEL_REPEATABLE_READ,
                         readonly=True)
        with conn.cursor() as cur:
            if exported is not None:
                cur.execute("SET TRANSACTION SNAPSHOT %s", (exported[0],))
                lsn = exported[1]
            else:
                cur.execute("SELECT pg_current_wal_lsn()::text")
                lsn = parse_lsn(cur.fetchone()[0])
            cur.execute("SELECT pg_snapshot_xmin(pg_current_snapshot())::text::int8")
            txid = int(cur.fetchone()[0])
        tables = []
        for relid, schema, table in self._catalog.published_tables():
            ts = self._table_schema(relid, schema, table)
            if ts is not None:
                tables.append((ts, [c.name for c in ts.columns]))
        log.info("Snapshot of %d table(s) at LSN %s", len(tables), lsn_text(lsn))
        self._snapshot = _Snapshot(conn, tables, lsn, txid, cfg.max_batch)
        self._phase = "snapshot"

    def _start_stream(self) -> None:
        cfg = self.cfg
        assert cfg is not None
        off = self._offset
        if off is not None and self._snapshot_complete():
            self._resume_commit = int(off.get("lsn_commit", off.get("lsn", -1)))
            self._resume_events = int(off.get("txn_event", 0)) if not off.get("snapshot") else 0
        self._cursor.start_replication(
            slot_name=cfg.slot, decode=False, start_lsn=0, status_interval=cfg.status_interval_s,
            options={"proto_version": "1", "publication_names": cfg.publication})
        self._phase = "stream"
        self._last_heartbeat = time.monotonic()
        log.info("Streaming changes from slot %s (resume after commit LSN %s, event %d)",
                 cfg.slot, lsn_text(max(self._resume_commit, 0)), self._resume_events)

    # ---- tables -----------------------------------------------------------------------------
    def _table_schema(self, relid: int, schema: str, table: str,
                      relation: Relation | None = None) -> ev.TableSchema | None:
        cfg = self.cfg
        assert cfg is not None and self._catalog is not None and self._mapper is not None
        if not cfg.captured(schema, table):
            return None
        meta = {c.name: c for c in self._catalog.columns(relid)}
        if relation is not None:
            if any(c.type_oid not in self._types for c in relation.columns):
                self._types = self._catalog.types()
                self._mapper = TypeMapper(self._types, self._modes)
            cols = [(c.name, c.type_oid, c.type_modifier) for c in relation.columns]
        else:
            cols = [(m.name, m.type_oid, m.typmod) for m in meta.values()]
        infos = []
        for name, oid, typmod in cols:
            m = meta.get(name)
            optional = not (m is not None and m.not_null)
            infos.append(ev.ColumnInfo(name, self._mapper.map(oid, typmod, optional),
                                       bool(m is not None and m.primary_key)))
        return ev.TableSchema(cfg.prefix, schema, table, infos,
                              relation.replica_identity if relation else "d")

    # ---- polling ----------------------------------------------------------------------------
    def _poll(self) -> list[SourceRecord] | None:
        cfg = self.cfg
        assert cfg is not None
        if self._phase == "init":
            self._setup()
        if self._phase == "snapshot":
            return self._snapshot_batch()
        if self._phase == "idle":
            self._lock.release()
            try:
                self._stopper.wait(cfg.poll_interval_ms / 1000)
            finally:
                self._lock.acquire()
            return None
        out: list[SourceRecord] = []
        self._drain(out)
        deadline = time.monotonic() + cfg.poll_interval_ms / 1000
        cur = self._cursor
        while len(out) < cfg.max_batch and not self._stopper.stopped:
            msg = cur.read_message()
            if msg is not None:
                self._handle(msg.payload, msg.data_start)
                self._drain(out)
                continue
            if out:
                break
            if self._maybe_heartbeat():
                self._drain(out)
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            select.select([cur], [], [], min(remaining, self.select_slice_s))
        return out or None

    def _drain(self, out: list[SourceRecord]) -> None:
        assert self.cfg is not None
        limit = self.cfg.max_batch
        while self._pending and len(out) < limit:
            p = self._pending.popleft()
            out.append(p.record)
            self._offset = p.record.source_offset
            if p.confirm is not None and p.confirm > self._polled_confirm:
                self._polled_confirm = p.confirm

    def _snapshot_batch(self) -> list[SourceRecord] | None:
        snap = self._snapshot
        assert snap is not None and self.cfg is not None
        rows = snap.rows()
        out = []
        for table, row, last in rows:
            offset = {"lsn": snap.lsn, "lsn_commit": snap.lsn, "txId": snap.txid,
                      "ts_usec": snap.ts_us, "snapshot": True, "last_snapshot_record": last,
                      "txn_event": 0}
            after = table.row(row)
            info = ev.SourceInfo(snap.ts_us, "last" if last else "true", snap.txid, snap.lsn)
            value = ev.envelope(table, "r", None, after,
                                ev.source_struct(self.cfg.prefix, self.cfg.dbname, table, info),
                                time.time_ns() // 1000)
            out.append(SourceRecord(table.topic, None, table.key_schema, table.key(after),
                                    table.envelope_schema, value,
                                    source_partition=self._partition, source_offset=offset))
        if out:
            self._offset = out[-1].source_offset
        if snap.done:
            log.info("Snapshot completed")
            try:
                self._snap_conn.commit()
                self._snap_conn.close()
            except psycopg2.Error:
                pass
            self._snap_conn = None
            self._snapshot = None
            if self.cfg.snapshot_mode == "initial_only":
                self._phase = "idle"
            else:
                # the exported snapshot is no longer needed: the slot streams from its start
                self._offset = out[-1].source_offset if out else \
                    {"lsn": snap.lsn, "lsn_commit": snap.lsn, "snapshot": True,
                     "last_snapshot_record": True, "txn_event": 0}
                self._start_stream()
        return out or None

    # ---- streaming --------------------------------------------------------------------------
    def _handle(self, payload: bytes, data_start: int) -> None:
        msg = decode(payload)
        if isinstance(msg, Change):
            self._on_change(msg, data_start)
        elif isinstance(msg, Begin):
            if msg.final_lsn < self._resume_commit:
                skip = SKIP_ALL
            elif msg.final_lsn == self._resume_commit:
                skip = self._resume_events
            else:
                skip = 0
            self._txn = _Txn(msg.xid, msg.final_lsn, msg.commit_ts_us, skip)
        elif isinstance(msg, Commit):
            self._on_commit(msg)
        elif isinstance(msg, Relation):
            self._relations[msg.oid] = self._table_schema(msg.oid, msg.namespace, msg.name, msg)
        elif isinstance(msg, Truncate):
            self._on_truncate(msg, data_start)
        elif isinstance(msg, TypeInfo):
            assert self._catalog is not None
            self._types = self._catalog.types()
            self._mapper = TypeMapper(self._types, self._modes)

    def _emit(self, topic: str, key_schema: Schema | None, key: Any, value_schema: Schema | None,
              value: Any, lsn: int, kind: str) -> None:
        txn = self._txn
        assert txn is not None
        txn.emitted += 1
        if txn.emitted <= txn.skip:
            return
        offset = {"lsn": lsn, "lsn_proc": lsn, "lsn_commit": txn.commit_lsn, "txId": txn.xid,
                  "ts_usec": txn.ts_us, "messageType": kind, "txn_event": txn.emitted}
        self._pending.append(_Pending(SourceRecord(
            topic, None, key_schema, key, value_schema, value, source_partition=self._partition,
            source_offset=offset)))

    def _data_event(self, table: ev.TableSchema, op: str, before: Struct | None,
                    after: Struct | None, key: Struct | None, lsn: int, kind: str) -> None:
        cfg = self.cfg
        txn = self._txn
        assert cfg is not None and txn is not None
        name = f"{table.schema_name}.{table.table}"
        if cfg.txn_metadata and not txn.begin_sent:
            txn.begin_sent = True
            k, v = ev.txn_metadata("BEGIN", txn.id, txn.ts_us // 1000)
            self._emit(cfg.txn_topic, k.schema, k, v.schema, v, lsn, "BEGIN")
        txn.data_events += 1
        txn.per_table[name] = txn.per_table.get(name, 0) + 1
        block = ev.txn_block(txn.id, txn.data_events, txn.per_table[name]) \
            if cfg.txn_metadata else None
        info = ev.SourceInfo(txn.ts_us, "false", txn.xid, lsn, self._last_commit_lsn)
        source = ev.source_struct(cfg.prefix, cfg.dbname, table, info)
        value = ev.envelope(table, op, before, after, source, time.time_ns() // 1000, block)
        key_schema = table.key_schema if key is not None else None  # truncate: no key
        self._emit(table.topic, key_schema, key, table.envelope_schema, value, lsn, kind)
        if op == "d" and cfg.tombstones:
            self._emit(table.topic, key_schema, key, None, None, lsn, kind)

    def _on_change(self, ch: Change, lsn: int) -> None:
        table = self._relations.get(ch.relation_oid)
        if table is None or self._txn is None:
            return
        skipped = self.cfg.skipped if self.cfg else frozenset()
        if ch.kind == "I":
            if "c" in skipped:
                return
            after = table.row(ch.new or [])
            self._data_event(table, "c", None, after, table.key(after), lsn, "INSERT")
            return
        if ch.kind == "D":
            if "d" in skipped:
                return
            old_row = table.row(ch.old or [], self._present(table, ch))
            self._data_event(table, "d", old_row, None, table.key(old_row), lsn, "DELETE")
            return
        after = table.row(ch.new or [])
        before: Struct | None = None
        if ch.old is not None:
            before = table.row(ch.old, self._present(table, ch))
        key = table.key(after)
        if before is not None and table.key_schema is not None:
            old_key = table.key(before)
            if old_key is not None and key is not None and old_key.as_dict() != key.as_dict():
                # a primary key change: Debezium's delete (+ tombstone) of the old key, then a
                # create of the new one
                if "d" not in skipped:
                    self._data_event(table, "d", before, None, old_key, lsn, "DELETE")
                if "c" not in skipped:
                    self._data_event(table, "c", None, after, key, lsn, "INSERT")
                return
        if "u" in skipped:
            return
        if ch.old_is_key:
            before = None  # REPLICA IDENTITY DEFAULT: no old row image
        self._data_event(table, "u", before, after, key, lsn, "UPDATE")

    @staticmethod
    def _present(table: ev.TableSchema, ch: Change) -> list[bool] | None:
        if not ch.old_is_key:
            return None
        return [c.key for c in table.columns]

    def _on_truncate(self, msg: Truncate, lsn: int) -> None:
        cfg = self.cfg
        assert cfg is not None
        if "t" in cfg.skipped or self._txn is None:
            return
        for oid in msg.relation_oids:
            table = self._relations.get(oid)
            if table is not None:
                self._data_event(table, "t", None, None, None, lsn, "TRUNCATE")

    def _on_commit(self, msg: Commit) -> None:
        cfg = self.cfg
        txn = self._txn
        assert cfg is not None
        if txn is not None and cfg.txn_metadata and txn.data_events:
            k, v = ev.txn_metadata("END", txn.id, txn.ts_us // 1000, dict(txn.per_table))
            self._emit(cfg.txn_topic, k.schema, k, v.schema, v, msg.commit_lsn, "END")
        if self._pending:
            self._pending[-1].confirm = msg.end_lsn
        elif msg.end_lsn > self._polled_confirm:
            self._polled_confirm = msg.end_lsn
        self._last_commit_lsn = msg.commit_lsn
        self._last_end_lsn = max(self._last_end_lsn, msg.end_lsn)
        self._txn = None

    def _maybe_heartbeat(self) -> bool:
        """Between transactions and with nothing buffered: a heartbeat record whose offset is the
        server's current WAL position, so committing it moves the slot on while the captured
        tables are idle."""
        cfg = self.cfg
        assert cfg is not None
        if cfg.heartbeat_ms <= 0 or self._txn is not None or self._pending:
            return False
        now = time.monotonic()
        if (now - self._last_heartbeat) * 1000 < cfg.heartbeat_ms:
            return False
        self._last_heartbeat = now
        # ask for a keepalive (a status update with "reply requested"): it carries the server's
        # current position, read into cursor.wal_end by psycopg2
        cur = self._cursor
        seen = int(getattr(cur, "wal_end", 0) or 0)
        cur.send_feedback(reply=True, force=True)
        deadline = now + 0.5
        while time.monotonic() < deadline:
            select.select([cur], [], [], 0.05)
            msg = cur.read_message()
            if msg is not None:
                self._handle(msg.payload, msg.data_start)
                if self._txn is not None or self._pending:
                    return False  # changes came first: the heartbeat waits for a quiet moment
                continue
            if int(getattr(cur, "wal_end", 0) or 0) > seen:
                break
        wal_end = int(getattr(cur, "wal_end", 0) or 0)
        position = max(wal_end, self._last_end_lsn, self._polled_confirm)
        ts_ms = time.time_ns() // 1_000_000
        k, v = ev.heartbeat(cfg.prefix, ts_ms)
        base = self._offset or {}
        offset = {"lsn": position, "lsn_proc": position, "lsn_commit": position,
                  "txId": base.get("txId"), "ts_usec": base.get("ts_usec"), "txn_event": 0}
        self._pending.append(_Pending(SourceRecord(
            cfg.heartbeat_topic, None, k.schema, k, v.schema, v,
            source_partition=self._partition, source_offset=offset), confirm=position))
        return True
