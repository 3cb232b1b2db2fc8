"""One open database for one task: a PostgreSQL connection (psycopg 3) or a DuckDB connection,
behind the same small interface. Driver errors are mapped to Connect's: a lost connection or a
server that is down -> RetriableException (the runtime retries the batch; the next call
reconnects); refused credentials or a missing database -> ConnectException with the driver's
message; a row the table refuses -> DataException."""

from __future__ import annotations

import hashlib
import logging
import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from ...errors import ConnectException, DataException, RetriableException
from .dialect import Dialect, DuckDBDialect, PostgresDialect, split_table
from .url import ParsedUrl, parse_url

log = logging.getLogger("samsa.connect.sql")

# libpq says these when the server is down or the connection broke: retry, it may come back
_PG_TRANSIENT_TEXT = ("connection refused", "could not connect", "server closed the connection",
                      "terminating connection", "the database system is starting up",
                      "the database system is shutting down", "the database system is in recovery",
                      "connection timed out", "timeout expired", "no connection to the server",
                      "connection is lost", "consuming input failed", "connection reset",
                      "the connection is closed", "is not open", "sending query failed")
_PG_TRANSIENT_STATES = ("08", "53", "57P", "40001", "40P01", "55P03", "58")
_PG_DATA_STATES = ("22", "23")


class Database:
    """The interface the sinks use. Not thread-safe: one per task."""

    dialect: Dialect
    kind: str

    def __init__(self, target: ParsedUrl) -> None:
        self.target = target

    def transaction(self) -> AbstractContextManager[None]:
        """One database transaction: commit on exit, roll back on an exception."""
        raise NotImplementedError

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one statement; the rows it returns (empty for statements without a result)."""
        raise NotImplementedError

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run one statement for many parameter rows in as few round trips as the driver can."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def table_columns(self, table: str) -> dict[str, str] | None:
        """Column name -> data type (upper case) of `table`, or None when it does not exist."""
        parts = split_table(table)
        name = parts[-1]
        schema = parts[-2] if len(parts) > 1 else None
        p = self.dialect.placeholder
        sql = ("SELECT column_name, data_type FROM information_schema.columns WHERE table_name = "
               f"{p} AND table_schema = " + (p if schema else self._default_schema_sql) +
               " ORDER BY ordinal_position")
        rows = self.execute(sql, [name, schema] if schema else [name])
        if not rows:
            return None
        return {str(r[0]): str(r[1]).upper() for r in rows}

    _default_schema_sql = "current_schema()"

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---- PostgreSQL ---------------------------------------------------------------------------------
class PostgresDatabase(Database):
    kind = "postgresql"

    def __init__(self, target: ParsedUrl, quote_identifiers: bool = True,
                 connect_timeout: int = 10) -> None:
        super().__init__(target)
        import psycopg

        self._psycopg = psycopg
        self.dialect = PostgresDialect(quote_identifiers)
        self._params = dict(target.params)
        self._params.setdefault("connect_timeout", str(connect_timeout))
        self._conn: Any = None
        self._connect()

    def _connect(self) -> Any:
        psycopg = self._psycopg
        try:
            self._conn = psycopg.connect(autocommit=True, **self._params)
        except psycopg.Error as e:
            raise self._map(e, connecting=True) from e
        return self._conn

    def _connection(self) -> Any:
        conn = self._conn
        if conn is None or conn.closed or conn.broken:
            if conn is not None:
                try:
                    conn.close()
                except Exception:
                    pass
            conn = self._connect()
        return conn

    def _map(self, e: Exception, connecting: bool = False) -> ConnectException:
        """A psycopg error as the Connect exception the runtime understands."""
        text = str(e).strip() or type(e).__name__
        state = getattr(e, "sqlstate", None) or ""
        low = text.lower()
        where = self.target.safe()
        if state.startswith("28") or "password authentication failed" in low or \
                ("role" in low and "does not exist" in low) or \
                "no password supplied" in low or "authentication failed" in low:
            return ConnectException(f"PostgreSQL at {where} refused the credentials: {text}")
        if state == "3D000" or ("database" in low and "does not exist" in low):
            return ConnectException(f"PostgreSQL at {where}: {text}")
        if state.startswith(_PG_TRANSIENT_STATES) or any(t in low for t in _PG_TRANSIENT_TEXT) \
                or isinstance(e, self._psycopg.OperationalError) and connecting:
            return RetriableException(f"PostgreSQL at {where} unavailable: {text}")
        if isinstance(e, self._psycopg.OperationalError) and (self._conn is None or
                                                             self._conn.broken or self._conn.closed):
            return RetriableException(f"PostgreSQL at {where}: connection lost: {text}")
        if state.startswith(_PG_DATA_STATES):
            return DataException(f"PostgreSQL refused the data: {text}")
        return ConnectException(f"PostgreSQL error: {text}")

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except self._psycopg.Error as e:
            raise self._map(e) from e

    @contextmanager
    def _tx(self) -> Iterator[None]:
        conn = self._connection()
        with self._errors(), conn.transaction():
            yield

    def transaction(self) -> AbstractContextManager[None]:
        return self._tx()

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        conn = self._connection()
        with self._errors():
            cur = conn.execute(sql, list(params) if params else None)
            return list(cur.fetchall()) if cur.description else []

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if not rows:
            return
        conn = self._connection()
        with self._errors(), conn.cursor() as cur:
            cur.executemany(sql, rows)  # psycopg pipelines these: one round trip per batch

    def copy_rows(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """COPY rows into a table: the fastest plain insert PostgreSQL has."""
        if not rows:
            return
        d = self.dialect
        sql = f"COPY {d.table(table)} ({', '.join(d.quote(c) for c in columns)}) FROM STDIN"
        conn = self._connection()
        with self._errors(), conn.cursor() as cur, cur.copy(sql) as copy:
            for row in rows:
                copy.write_row(row)

    def copy_upsert(self, table: str, columns: Sequence[str], keys: Sequence[str],
                    rows: Sequence[Sequence[Any]]) -> None:
        """Upsert many rows ~5x faster than a pipelined executemany: COPY them into a session
        temp table with the target's column types, then one INSERT .. SELECT .. ON CONFLICT.
        Rows must not repeat a key. Meant to run inside the caller's transaction."""
        if not rows:
            return
        d = self.dialect
        digest = hashlib.sha1("\0".join([table, *columns]).encode()).hexdigest()[:20]
        stage = d.quote(f"__samsa_stage_{digest}")
        cols = ", ".join(d.quote(c) for c in columns)
        conflict = d.on_conflict(columns, keys)
        conn = self._connection()
        with self._errors():
            conn.execute(f"CREATE TEMP TABLE IF NOT EXISTS {stage} AS SELECT {cols} FROM "
                         f"{d.table(table)} WITH NO DATA")
            conn.execute(f"TRUNCATE {stage}")
            with conn.cursor() as cur, cur.copy(f"COPY {stage} ({cols}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
            conn.execute(f"INSERT INTO {d.table(table)} ({cols}) SELECT {cols} FROM {stage} "
                         f"{conflict}")

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:
                pass


# ---- DuckDB -------------------------------------------------------------------------------------
_duckdb_lock = threading.Lock()


class DuckDBDatabase(Database):
    kind = "duckdb"
    _default_schema_sql = "current_schema()"

    def __init__(self, target: ParsedUrl, quote_identifiers: bool = True) -> None:
        super().__init__(target)
        import duckdb

        self._duckdb = duckdb
        self.dialect = DuckDBDialect(quote_identifiers)
        self.path = target.params.get("path") or ":memory:"
        self._depth = 0
        try:
            with _duckdb_lock:  # duckdb's instance cache is per process; open one at a time
                self._conn: Any = duckdb.connect(self.path)
        except duckdb.Error as e:
            raise self._map(e) from e

    def _map(self, e: Exception) -> ConnectException:
        d = self._duckdb
        text = str(e).strip() or type(e).__name__
        if isinstance(e, d.IOException | d.TransactionException | d.InterruptException) or \
                "lock" in text.lower() and "conflict" in text.lower():
            return RetriableException(f"DuckDB at {self.path}: {text}")
        if isinstance(e, d.ConstraintException | d.ConversionException | d.OutOfRangeException |
                      d.TypeMismatchException | d.InvalidInputException):
            return DataException(f"DuckDB refused the data: {text}")
        return ConnectException(f"DuckDB error: {text}")

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except self._duckdb.Error as e:
            raise self._map(e) from e

    @contextmanager
    def _tx(self) -> Iterator[None]:
        if self._depth:  # nested: part of the outer transaction
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        with self._errors():
            self._conn.begin()
        self._depth = 1
        try:
            yield
        except BaseException:
            self._depth = 0
            try:
                self._conn.rollback()
            except self._duckdb.Error:
                pass
            raise
        self._depth = 0
        try:
            with self._errors():
                self._conn.commit()
        except BaseException:
            try:
                self._conn.rollback()
            except self._duckdb.Error:
                pass
            raise

    def transaction(self) -> AbstractContextManager[None]:
        return self._tx()

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._errors():
            cur = self._conn.execute(sql, list(params) if params else None)
            return list(cur.fetchall()) if cur.description else []

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """DuckDB runs executemany one row at a time (~500 rows/s): instead, hand the rows over
        as one Arrow table and run the statement once against it (INSERT ... SELECT, UPDATE ...
        FROM, DELETE ... USING). Statements of another shape, or rows Arrow cannot type, take
        the slow path."""
        if not rows:
            return
        if len(rows) <= _SMALL:  # registering a view costs more than a few single executes
            with self._errors():
                self._conn.executemany(sql, [list(r) for r in rows])
            return
        rewritten = _set_based(sql, len(rows[0]))
        table = _arrow_table(rows) if rewritten is not None else None
        with self._errors():
            if rewritten is None or table is None:
                self._conn.executemany(sql, [list(r) for r in rows])
                return
            self._conn.register(_BATCH_VIEW, table)
            try:
                self._conn.execute(rewritten)
            finally:
                try:
                    self._conn.unregister(_BATCH_VIEW)
                except self._duckdb.Error:  # an aborted transaction refuses even this
                    pass

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:
                pass


_BATCH_VIEW = "__samsa_batch"
_SMALL = 8
_INSERT = re.compile(r"^\s*(INSERT\s+INTO\s+.+?\))\s*VALUES\s*\(([?,\s]*)\)(.*)$",
                     re.IGNORECASE | re.DOTALL)


def _set_based(sql: str, width: int) -> str | None:
    """The statement rewritten to read its parameters from the batch view (column pN for the
    N-th `?`), or None when its shape is not one the sinks build."""
    m = _INSERT.match(sql)
    if m is not None:
        if m.group(2).count("?") != width or "?" in m.group(3):
            return None
        cols = ", ".join(f"{_BATCH_VIEW}.p{i}" for i in range(width))
        return f"{m.group(1)} SELECT {cols} FROM {_BATCH_VIEW}{m.group(3)}"
    head = sql.lstrip()[:7].upper()
    if head not in ("UPDATE ", "DELETE "):
        return None
    out, n, quote = [], 0, ""
    for ch in sql:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "?":
            out.append(f"{_BATCH_VIEW}.p{n}")
            n += 1
            continue
        out.append(ch)
    text = "".join(out)
    where = text.upper().rfind(" WHERE ")
    if n != width or where < 0:
        return None
    joiner = " FROM " if head == "UPDATE " else " USING "
    return text[:where] + joiner + _BATCH_VIEW + text[where:]


def _arrow_table(rows: Sequence[Sequence[Any]]) -> Any:
    """Rows as an Arrow table with columns p0..pN, or None when a column has mixed types."""
    try:
        import pyarrow as pa
    except ImportError:  # pragma: no cover - pyarrow comes with the connectors extra
        return None
    width = len(rows[0])
    try:
        return pa.table({f"p{i}": pa.array([r[i] for r in rows]) for i in range(width)})
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError):
        return None


def open_database(url: str, user: str | None = None, password: str | None = None, *,
                  quote_identifiers: bool = True) -> Database:
    """Open the database a connection URL names (see url.SUPPORTED). Raises ConnectException for
    an unknown scheme, refused credentials or a missing database; RetriableException when the
    server cannot be reached."""
    target = parse_url(url, user, password)
    if target.kind == "postgresql":
        return PostgresDatabase(target, quote_identifiers)
    return DuckDBDatabase(target, quote_identifiers)
