"""The connector's PostgreSQL connections (psycopg2: only its LogicalReplicationConnection can
stream): a regular one for the catalog, the publication and the slot's state; a replication
one that creates the slot (exporting its snapshot) and streams pgoutput; a snapshot one that
reads the tables inside that exported snapshot. Every session formats values the way the type
converters expect (ISO dates, UTC, ISO-8601 intervals, hex bytea)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import psycopg2
import psycopg2.errors
import psycopg2.extensions
import psycopg2.extras

from ...errors import ConnectException
from .config import CdcConfig
from .types import CATALOG_SQL, PgType, catalog_from_rows

log = logging.getLogger("samsa.connect.connectors.postgres_cdc")

SESSION_OPTIONS = ("-c DateStyle=ISO -c TimeZone=UTC -c IntervalStyle=iso_8601 "
                   "-c extra_float_digits=3 -c bytea_output=hex -c lc_monetary=C")

# SQLSTATEs that no reconnect will fix: bad credentials (class 28), unknown database (3D000)
FATAL_SQLSTATE_PREFIXES = ("28", "3D")
# ... and the ones a retry will: object in use (an old walsender still holds the slot),
# shutdown / starting up (class 57), connection exceptions (class 08)
RETRIABLE_SQLSTATE_PREFIXES = ("55006", "57", "08", "53300")


def is_retriable(error: BaseException) -> bool:
    """Whether a psycopg2 error means "the database is (temporarily) unreachable"."""
    if not isinstance(error, psycopg2.Error):
        return False
    code = getattr(error, "pgcode", None)
    if code:
        if code.startswith(FATAL_SQLSTATE_PREFIXES):
            return False
        return code.startswith(RETRIABLE_SQLSTATE_PREFIXES)
    if isinstance(error, psycopg2.OperationalError | psycopg2.InterfaceError):
        text = str(error)
        return not ("authentication failed" in text or "does not exist" in text)
    return isinstance(error, psycopg2.DatabaseError)


def connect(cfg: CdcConfig, replication: bool = False) -> Any:
    kwargs = dict(cfg.dsn_params(), options=SESSION_OPTIONS)
    if replication:
        kwargs["connection_factory"] = psycopg2.extras.LogicalReplicationConnection
    return psycopg2.connect(**kwargs)


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def raw_strings(conn: Any) -> None:
    """Make this connection return every column as its text form (the output function's)."""
    oids = tuple(psycopg2.extensions.string_types.keys())
    raw = psycopg2.extensions.new_type(oids, "SAMSA_RAW", lambda value, cur: value)
    psycopg2.extensions.register_type(raw, conn)


@dataclass(frozen=True)
class ColumnMeta:
    name: str
    type_oid: int
    typmod: int
    not_null: bool
    primary_key: bool


@dataclass(frozen=True)
class SlotState:
    plugin: str | None
    database: str | None
    active_pid: int | None
    confirmed_flush: str | None


class Catalog:
    """Queries on the regular connection."""

    def __init__(self, cfg: CdcConfig) -> None:
        self.cfg = cfg
        self.conn = connect(cfg)
        self.conn.autocommit = True

    def close(self) -> None:
        try:
            self.conn.close()
        except psycopg2.Error:
            pass

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self.conn.cursor() as cur:
            cur.execute(sql, params)
            return list(cur.fetchall()) if cur.description else []

    def check_wal_level(self) -> None:
        level = self.query("SHOW wal_level")[0][0]
        if level != "logical":
            raise ConnectException(f"PostgreSQL has wal_level={level}: logical decoding needs "
                                   "wal_level=logical (postgresql.conf, then restart the server)")

    def types(self) -> dict[int, PgType]:
        return catalog_from_rows(self.query(CATALOG_SQL))

    def columns(self, relid: int) -> list[ColumnMeta]:
        rows = self.query("""
            SELECT a.attname, a.atttypid::int8, a.atttypmod, a.attnotnull,
                   COALESCE(a.attnum = ANY(i.indkey), false)
            FROM pg_attribute a
            LEFT JOIN pg_index i ON i.indrelid = a.attrelid AND i.indisprimary
            WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''
            ORDER BY a.attnum""", (relid,))
        return [ColumnMeta(r[0], int(r[1]), int(r[2]), bool(r[3]), bool(r[4])) for r in rows]

    def publication_exists(self) -> bool:
        return bool(self.query("SELECT 1 FROM pg_publication WHERE pubname = %s",
                               (self.cfg.publication,)))

    def all_tables(self) -> list[tuple[int, str, str]]:
        rows = self.query("""
            SELECT c.oid::int8, n.nspname, c.relname FROM pg_class c
            JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema')
              AND n.nspname NOT LIKE 'pg_toast%%' AND NOT c.relispartition
            ORDER BY n.nspname, c.relname""")
        return [(int(r[0]), r[1], r[2]) for r in rows]

    def ensure_publication(self) -> None:
        cfg = self.cfg
        exists = self.publication_exists()
        pub = quote_ident(cfg.publication)
        if cfg.autocreate == "disabled":
            if not exists:
                raise ConnectException(
                    f"Publication '{cfg.publication}' does not exist in database '{cfg.dbname}' "
                    "and publication.autocreate.mode is 'disabled': create it (CREATE "
                    "PUBLICATION ... FOR TABLE ...) or change publication.autocreate.mode")
            return
        if cfg.autocreate == "all_tables":
            if not exists:
                log.info("Creating publication %s FOR ALL TABLES", cfg.publication)
                self.query(f"CREATE PUBLICATION {pub} FOR ALL TABLES")
            return
        tables = [f"{quote_ident(s)}.{quote_ident(t)}" for _, s, t in self.all_tables()
                  if cfg.captured(s, t)]
        if not tables:
            raise ConnectException(f"publication.autocreate.mode=filtered: no table of database "
                                   f"'{cfg.dbname}' matches the include/exclude lists")
        listed = ", ".join(tables)
        if exists:
            self.query(f"ALTER PUBLICATION {pub} SET TABLE {listed}")
        else:
            log.info("Creating publication %s FOR TABLE %s", cfg.publication, listed)
            self.query(f"CREATE PUBLICATION {pub} FOR TABLE {listed}")

    def published_tables(self) -> list[tuple[int, str, str]]:
        rows = self.query("""
            SELECT c.oid::int8, p.schemaname, p.tablename FROM pg_publication_tables p
            JOIN pg_namespace n ON n.nspname = p.schemaname
            JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = p.tablename
            WHERE p.pubname = %s ORDER BY p.schemaname, p.tablename""", (self.cfg.publication,))
        return [(int(r[0]), r[1], r[2]) for r in rows if self.cfg.captured(r[1], r[2])]

    def slot(self) -> SlotState | None:
        rows = self.query("""
            SELECT plugin, database, active_pid, confirmed_flush_lsn::text
            FROM pg_replication_slots WHERE slot_name = %s""", (self.cfg.slot,))
        if not rows:
            return None
        r = rows[0]
        return SlotState(r[0], r[1], r[2], r[3])

    def drop_slot(self, wait_s: float = 10.0) -> None:
        """Drop the slot, waiting (bounded) for a just-closed walsender to release it."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                self.query("SELECT pg_drop_replication_slot(%s)", (self.cfg.slot,))
                return
            except psycopg2.errors.ObjectInUse:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.1)
