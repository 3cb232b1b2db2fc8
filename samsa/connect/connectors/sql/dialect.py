"""SQL dialects: identifier quoting, SQL types for Connect schemas, and the statements the sinks
run (CREATE TABLE, ALTER TABLE ADD, INSERT, upsert, UPDATE, DELETE). The type choices follow
Confluent's JDBC sink dialects (INT32 -> INT, FLOAT64 -> DOUBLE PRECISION, ...), plus a JSON type
for arrays, maps and nested structs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...data import (
    DATE_NAME,
    DECIMAL_NAME,
    DECIMAL_SCALE,
    TIME_NAME,
    TIMESTAMP_NAME,
    Schema,
    Type,
)
from ...errors import ConnectException


@dataclass(frozen=True)
class Column:
    """A column to create: name, SQL type, NULL allowed, default as a SQL literal (or None)."""

    name: str
    sql_type: str
    nullable: bool = True
    default: str | None = None


class Dialect:
    """What differs between databases. `placeholder` is the driver's parameter marker."""

    name = "generic"
    placeholder = "?"
    json_type = "TEXT"
    _types: dict[Type, str] = {}
    _logical: dict[str, str] = {}

    def __init__(self, quote_identifiers: bool = True) -> None:
        self.quote_identifiers = quote_identifiers

    # ---- names ----------------------------------------------------------------------------
    def quote(self, name: str) -> str:
        """One identifier, quoted (quote.sql.identifiers=always) or as is (never)."""
        if not self.quote_identifiers:
            return name
        return '"' + name.replace('"', '""') + '"'

    def table(self, name: str) -> str:
        """A table name, `schema.table` split on the dot like Confluent's TableId parsing."""
        return ".".join(self.quote(part) for part in split_table(name))

    # ---- types ----------------------------------------------------------------------------
    def sql_type(self, schema: Schema) -> str:
        """The column type for a Connect schema (logical types first, then the physical one)."""
        if schema.name == DECIMAL_NAME:
            return self.decimal_type(int(schema.params.get(DECIMAL_SCALE, "0")))
        if schema.name in self._logical:
            return self._logical[schema.name]
        if schema.type in (Type.ARRAY, Type.MAP, Type.STRUCT):
            return self.json_type
        try:
            return self._types[schema.type]
        except KeyError:
            raise ConnectException(f"{self.name}: no SQL type for Connect type "
                                   f"{schema.type.name}") from None

    def decimal_type(self, scale: int) -> str:
        return "DECIMAL"

    def literal(self, value: object) -> str:
        """A SQL literal for a column default (numbers, booleans, strings)."""
        if value is None:
            return "NULL"
        if isinstance(value, bool):
            return "TRUE" if value else "FALSE"
        if isinstance(value, int | float):
            return repr(value)
        return "'" + str(value).replace("'", "''") + "'"

    # ---- DDL ------------------------------------------------------------------------------
    def create_table(self, table: str, columns: Sequence[Column], primary_key: Sequence[str] = (),
                     if_not_exists: bool = True) -> str:
        parts = [self._column_def(c) for c in columns]
        if primary_key:
            parts.append("PRIMARY KEY(" + ", ".join(self.quote(k) for k in primary_key) + ")")
        guard = "IF NOT EXISTS " if if_not_exists else ""
        return f"CREATE TABLE {guard}{self.table(table)} (\n  " + ",\n  ".join(parts) + ")"

    def add_column(self, table: str, column: Column) -> str:
        return f"ALTER TABLE {self.table(table)} ADD COLUMN {self._column_def(column)}"

    def _column_def(self, c: Column) -> str:
        text = f"{self.quote(c.name)} {c.sql_type}"
        if c.default is not None:
            text += f" DEFAULT {c.default}"
        if not c.nullable:
            text += " NOT NULL"
        return text

    # ---- DML (with placeholders, for executemany) ----------------------------------------
    def _marks(self, n: int) -> str:
        return ", ".join([self.placeholder] * n)

    def insert(self, table: str, columns: Sequence[str]) -> str:
        cols = ", ".join(self.quote(c) for c in columns)
        return f"INSERT INTO {self.table(table)} ({cols}) VALUES ({self._marks(len(columns))})"

    def upsert(self, table: str, columns: Sequence[str], keys: Sequence[str]) -> str:
        """INSERT ... ON CONFLICT (keys) DO UPDATE SET the other columns (DO NOTHING when all
        columns are keys). A batch must not hold one key twice: the databases refuse that."""
        return f"{self.insert(table, columns)} {self.on_conflict(columns, keys)}"

    def on_conflict(self, columns: Sequence[str], keys: Sequence[str]) -> str:
        """The ON CONFLICT clause of an upsert (also for INSERT .. SELECT)."""
        if not keys:
            raise ConnectException("upsert needs key columns")
        conflict = ", ".join(self.quote(k) for k in keys)
        rest = [c for c in columns if c not in keys]
        action = "DO NOTHING" if not rest else \
            "DO UPDATE SET " + ", ".join(f"{self.quote(c)}=EXCLUDED.{self.quote(c)}" for c in rest)
        return f"ON CONFLICT ({conflict}) {action}"

    def update(self, table: str, columns: Sequence[str], keys: Sequence[str]) -> str:
        """UPDATE of `columns` WHERE keys; parameters: the columns' values, then the keys'."""
        sets = ", ".join(f"{self.quote(c)} = {self.placeholder}" for c in columns)
        return f"UPDATE {self.table(table)} SET {sets} WHERE {self._where(keys)}"

    def delete(self, table: str, keys: Sequence[str]) -> str:
        return f"DELETE FROM {self.table(table)} WHERE {self._where(keys)}"

    def _where(self, keys: Sequence[str]) -> str:
        if not keys:
            raise ConnectException("UPDATE/DELETE need key columns")
        return " AND ".join(f"{self.quote(k)} = {self.placeholder}" for k in keys)


class PostgresDialect(Dialect):
    name = "PostgreSQL"
    placeholder = "%s"
    json_type = "JSONB"
    _types = {Type.INT8: "SMALLINT", Type.INT16: "SMALLINT", Type.INT32: "INT",
              Type.INT64: "BIGINT", Type.FLOAT32: "REAL", Type.FLOAT64: "DOUBLE PRECISION",
              Type.BOOLEAN: "BOOLEAN", Type.STRING: "TEXT", Type.BYTES: "BYTEA"}
    _logical = {DATE_NAME: "DATE", TIME_NAME: "TIME", TIMESTAMP_NAME: "TIMESTAMP"}


class DuckDBDialect(Dialect):
    name = "DuckDB"
    placeholder = "?"
    json_type = "JSON"
    _types = {Type.INT8: "TINYINT", Type.INT16: "SMALLINT", Type.INT32: "INTEGER",
              Type.INT64: "BIGINT", Type.FLOAT32: "FLOAT", Type.FLOAT64: "DOUBLE",
              Type.BOOLEAN: "BOOLEAN", Type.STRING: "VARCHAR", Type.BYTES: "BLOB"}
    _logical = {DATE_NAME: "DATE", TIME_NAME: "TIME", TIMESTAMP_NAME: "TIMESTAMP"}

    def decimal_type(self, scale: int) -> str:
        # DuckDB's DECIMAL is bounded (precision <= 38): the widest one with Connect's scale.
        return f"DECIMAL(38, {min(max(scale, 0), 38)})"


def split_table(name: str) -> list[str]:
    """`catalog.schema.table` / `schema.table` / `table` into its parts (at most three)."""
    parts = [p for p in name.split(".")]
    if not name or len(parts) > 3 or any(not p for p in parts):
        raise ConnectException(f"invalid table name {name!r}")
    return parts
