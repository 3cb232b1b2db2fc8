"""The local warehouse behind the Snowflake-shaped sink: a DuckDB file or a PostgreSQL database,
reached through the shared SQL layer. It creates the schema and the per-topic tables
(RECORD_METADATA, RECORD_CONTENT as JSON / jsonb), and writes a flush - rows of every table plus
the next offset of every partition - in ONE transaction, after checking that no other writer
moved those partitions' offsets since this task read them (the offset-token check Snowpipe
Streaming channels do), so a zombie task cannot add a second copy of rows.

DuckDB files are opened per flush and closed after it: the file lock is held only while writing,
so other processes (a query, the pipeline's Spark job) can open the same file in between."""

from __future__ import annotations

import logging
import zlib
from collections.abc import Iterator
from contextlib import contextmanager

from ...errors import ConnectException, RetriableException
from ..sql import Database, OffsetTable, open_database
from ..sql.url import parse_url
from .config import SnowflakeSettings

log = logging.getLogger("samsa.connect.snowflake")

METADATA_COLUMN = "record_metadata"
CONTENT_COLUMN = "record_content"
COLUMNS = (METADATA_COLUMN, CONTENT_COLUMN)
OFFSETS_TABLE = "__samsa_connect_offsets"


def fold(name: str) -> str:
    """Snowflake upper-cases unquoted identifiers; PostgreSQL and DuckDB lower-case them. Names are
    created folded the local way, so the same unquoted SQL finds them."""
    return name.lower()


class Fenced(Exception):
    """Another writer moved these partitions' stored offsets: {(topic, partition): next}."""

    def __init__(self, stored: dict[tuple[str, int], int | None]) -> None:
        super().__init__(f"offsets moved by another writer: {stored}")
        self.stored = stored


class Warehouse:
    def __init__(self, settings: SnowflakeSettings) -> None:
        self.settings = settings
        self.schema = fold(settings.schema)
        self.duckdb = settings.is_duckdb
        target = parse_url(settings.url)
        self._user = None if target.params.get("user") else settings.user
        self._db: Database | None = None
        self._tables: set[str] = set()
        self._prepared = False
        self._stores: dict[int, OffsetTable] = {}

    # ---- names ----------------------------------------------------------------------------
    def qualified(self, table: str) -> str:
        """`schema.table` for a Snowflake table name (`[db.][schema.]table` from the map)."""
        parts = [fold(p) for p in table.split(".")]
        if len(parts) == 1:
            return f"{self.schema}.{parts[0]}"
        return f"{parts[-2]}.{parts[-1]}"  # a database part is the connection's, not a prefix

    # ---- connections ------------------------------------------------------------------------
    def _open(self) -> Database:
        if self.duckdb:
            return open_database(self.settings.url)
        return open_database(self.settings.url, user=self._user)

    @contextmanager
    def session(self) -> Iterator[Database]:
        """The database, prepared (schema and offsets table exist). A lost connection is dropped
        so the next session reconnects; DuckDB files are closed after each session."""
        db = self._db if self._db is not None else self._open()
        self._db = None
        keep = not self.duckdb
        try:
            if not self._prepared:
                self._prepare(db)
            yield db
        except RetriableException:
            keep = False
            raise
        finally:
            if keep:
                self._db = db
            else:
                db.close()

    def _prepare(self, db: Database) -> None:
        db.execute(f"CREATE SCHEMA IF NOT EXISTS {db.dialect.quote(self.schema)}")
        self._store(db)
        self._prepared = True

    def check(self) -> None:
        """Connect once (start-up): refused credentials or a missing database fail here."""
        with self.session():
            pass

    def close(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            db.close()

    # ---- tables, offsets, flushes ---------------------------------------------------------
    def ensure_table(self, db: Database, table: str) -> None:
        if table in self._tables:
            return
        d = db.dialect
        schema_name = table.split(".")[0]
        if schema_name != self.schema:
            db.execute(f"CREATE SCHEMA IF NOT EXISTS {d.quote(schema_name)}")
        columns = db.table_columns(table)
        if columns is None:
            db.execute(f"CREATE TABLE IF NOT EXISTS {d.table(table)} ("
                       f"{d.quote(METADATA_COLUMN)} {d.json_type}, "
                       f"{d.quote(CONTENT_COLUMN)} {d.json_type})")
        else:
            have = {c.lower() for c in columns}
            missing = [c.upper() for c in COLUMNS if c not in have]
            if missing:
                raise ConnectException(f"table {table} exists but is not compatible with the "
                                       f"Snowflake connector's layout: no {', '.join(missing)} "
                                       f"column")
        self._tables.add(table)

    def alter_offsets(self, connector: str, offsets: dict[tuple[str, int], int | None]) -> None:
        """An operator's edit of the stored offsets (KIP-875), in one transaction."""
        with self.session() as db:
            self._store(db).alter(connector, offsets)

    def read_offsets(self, connector: str) -> dict[tuple[str, int], int]:
        with self.session() as db:
            return self._store(db).read(connector)

    def _store(self, db: Database) -> OffsetTable:
        store = self._stores.get(id(db))
        if store is None or store.db is not db:
            store = OffsetTable(db, f"{self.schema}.{OFFSETS_TABLE}")
            self._stores = {id(db): store}
        return store

    def write(self, connector: str, rows: dict[str, list[tuple[str, str]]],
              offsets: dict[tuple[str, int], int],
              believed: dict[tuple[str, int], int | None]) -> None:
        """Rows of each table and the partitions' next offsets, in one transaction. Raises Fenced
        (nothing written) when a stored offset is not what this task believed it was."""
        with self.session() as db:
            for table in rows:
                self.ensure_table(db, table)
            store = self._store(db)
            with db.transaction():
                if db.kind == "postgresql":  # flushes of one connector take turns: the check holds
                    db.execute("SELECT pg_advisory_xact_lock(%s)", [zlib.crc32(connector.encode())])
                stored = store.read(connector)
                moved = {k: stored.get(k) for k in offsets if stored.get(k) != believed.get(k)}
                if moved:
                    raise Fenced(moved)
                for table, table_rows in rows.items():
                    if table_rows:
                        _insert(db, table, table_rows)
                store.write(connector, offsets)


def _insert(db: Database, table: str, rows: list[tuple[str, str]]) -> None:
    copy = getattr(db, "copy_rows", None)
    if copy is not None:
        copy(table, COLUMNS, rows)
    else:
        db.executemany(db.dialect.insert(table, COLUMNS), rows)
