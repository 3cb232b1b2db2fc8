"""Debezium's change-event shapes: per table a Key schema (the primary key), a Value schema (the
row) and an Envelope (before / after / source / transaction / op / ts_ms), the shared
io.debezium.connector.postgresql.Source block, heartbeat and transaction-metadata records.

Structs are built straight from values already converted to their column's schema, so they skip
Struct.put's per-field validation (the hot path of a CDC task)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...api import SAMSA_VERSION
from ...data import Schema, Struct, Type, struct_schema
from .pgoutput import UNCHANGED_TOAST
from .types import Mapped, fallback, unavailable

CONNECTOR = "postgresql"
SOURCE_NAME = "io.debezium.connector.postgresql.Source"
VERSION = f"samsa-{SAMSA_VERSION}"

_S = Schema(Type.STRING)
_OS = Schema(Type.STRING, optional=True)
_L = Schema(Type.INT64)
_OL = Schema(Type.INT64, optional=True)

SNAPSHOT_ENUM = Schema(Type.STRING, optional=True, default="false", name="io.debezium.data.Enum",
                       version=1, parameters=(("allowed", "true,last,false,incremental"),))

SOURCE_SCHEMA = struct_schema([
    ("version", _S), ("connector", _S), ("name", _S), ("ts_ms", _L), ("snapshot", SNAPSHOT_ENUM),
    ("db", _S), ("sequence", _OS), ("ts_us", _OL), ("ts_ns", _OL), ("schema", _S),
    ("table", _S), ("txId", _OL), ("lsn", _OL), ("xmin", _OL)], name=SOURCE_NAME)

TXN_BLOCK_SCHEMA = struct_schema([("id", _S), ("total_order", _L), ("data_collection_order", _L)],
                                 name="event.block", version=1, optional=True)

HEARTBEAT_KEY_SCHEMA = struct_schema([("serverName", _S)],
                                     name="io.debezium.connector.common.ServerNameKey")
HEARTBEAT_VALUE_SCHEMA = struct_schema([("ts_ms", _L)],
                                       name="io.debezium.connector.common.Heartbeat")

TXN_KEY_SCHEMA = struct_schema([("id", _S)],
                               name="io.debezium.connector.common.TransactionMetadataKey")
_COLLECTION = struct_schema([("data_collection", _S), ("event_count", _L)])
TXN_VALUE_SCHEMA = struct_schema([
    ("status", _S), ("id", _S), ("event_count", _OL),
    ("data_collections", Schema(Type.ARRAY, optional=True, value_schema=_COLLECTION)),
    ("ts_ms", _L)], name="io.debezium.connector.common.TransactionMetadataValue")


def make_struct(schema: Schema, values: dict[str, Any]) -> Struct:
    """A Struct whose values are known to fit `schema` (no per-field validation)."""
    s = Struct.__new__(Struct)
    s.schema = schema
    s._values = values
    return s


@dataclass
class ColumnInfo:
    name: str
    mapped: Mapped
    key: bool


class TableSchema:
    """One captured table's schemas and row conversion (built from a Relation message or the
    catalog; rebuilt when a new Relation message says the table changed)."""

    def __init__(self, prefix: str, schema: str, table: str, columns: list[ColumnInfo],
                 replica_identity: str = "d") -> None:
        self.schema_name = schema
        self.table = table
        self.topic = f"{prefix}.{schema}.{table}"
        self.columns = columns
        self.replica_identity = replica_identity
        base = f"{prefix}.{schema}.{table}"
        self.value_schema = struct_schema([(c.name, c.mapped.schema) for c in columns],
                                          name=f"{base}.Value", optional=True)
        self._required = struct_schema([(c.name, c.mapped.schema) for c in columns],
                                        name=f"{base}.Value")
        keys = [c for c in columns if c.key]
        self.key_index = [i for i, c in enumerate(columns) if c.key]
        self.key_schema: Schema | None = struct_schema(
            [(c.name, c.mapped.schema.with_(optional=False)) for c in keys],
            name=f"{base}.Key") if keys else None
        self.envelope_schema = struct_schema([
            ("before", self.value_schema), ("after", self.value_schema),
            ("source", SOURCE_SCHEMA), ("transaction", TXN_BLOCK_SCHEMA), ("op", _S),
            ("ts_ms", _OL), ("ts_us", _OL), ("ts_ns", _OL)], name=f"{base}.Envelope", version=1)
        self._converters = [(c.name, c.mapped.convert, c.mapped.schema) for c in columns]

    def row(self, texts: Sequence[object], present: Sequence[bool] | None = None) -> Struct:
        """The Value struct of a row from its text values (None = SQL NULL, UNCHANGED_TOAST =
        not sent); `present` False marks columns absent from a key-only old tuple."""
        values: dict[str, Any] = {}
        for i, (name, conv, schema) in enumerate(self._converters):
            raw = texts[i] if i < len(texts) else None
            if present is not None and not present[i]:
                values[name] = None if schema.optional else fallback(schema)
            elif raw is None:
                values[name] = None if schema.optional else fallback(schema)
            elif raw is UNCHANGED_TOAST:
                values[name] = unavailable(schema)
            else:
                values[name] = conv(raw)  # type: ignore[arg-type]
        return make_struct(self.value_schema, values)

    def key(self, row: Struct) -> Struct | None:
        if self.key_schema is None:
            return None
        return make_struct(self.key_schema,
                           {f.name: row.get(f.name) for f in self.key_schema.fields})


@dataclass
class SourceInfo:
    """The per-event `source` block's variable parts."""

    ts_us: int
    snapshot: str  # "false" | "true" | "last" | "first"
    txid: int | None
    lsn: int | None
    last_commit_lsn: int | None = None


def source_struct(prefix: str, db: str, table: TableSchema | None, info: SourceInfo) -> Struct:
    sequence = None
    if info.lsn is not None:
        sequence = json.dumps([None if info.last_commit_lsn is None else str(info.last_commit_lsn),
                               str(info.lsn)], separators=(",", ":"))
    return make_struct(SOURCE_SCHEMA, {
        "version": VERSION, "connector": CONNECTOR, "name": prefix,
        "ts_ms": info.ts_us // 1000, "snapshot": info.snapshot, "db": db,
        "sequence": sequence, "ts_us": info.ts_us, "ts_ns": info.ts_us * 1000,
        "schema": table.schema_name if table else "", "table": table.table if table else "",
        "txId": info.txid, "lsn": info.lsn, "xmin": None})


def envelope(table: TableSchema, op: str, before: Struct | None, after: Struct | None,
             source: Struct, now_us: int, txn: Struct | None = None) -> Struct:
    return make_struct(table.envelope_schema, {
        "before": before, "after": after, "source": source, "transaction": txn, "op": op,
        "ts_ms": now_us // 1000, "ts_us": now_us, "ts_ns": now_us * 1000})


def txn_block(txn_id: str, total_order: int, collection_order: int) -> Struct:
    return make_struct(TXN_BLOCK_SCHEMA, {"id": txn_id, "total_order": total_order,
                                          "data_collection_order": collection_order})


def txn_metadata(status: str, txn_id: str, ts_ms: int,
                 counts: dict[str, int] | None = None) -> tuple[Struct, Struct]:
    key = make_struct(TXN_KEY_SCHEMA, {"id": txn_id})
    collections = None
    total = None
    if counts is not None:
        collections = [make_struct(_COLLECTION, {"data_collection": k, "event_count": v})
                       for k, v in counts.items()]
        total = sum(counts.values())
    value = make_struct(TXN_VALUE_SCHEMA, {"status": status, "id": txn_id, "event_count": total,
                                           "data_collections": collections, "ts_ms": ts_ms})
    return key, value


def heartbeat(prefix: str, ts_ms: int) -> tuple[Struct, Struct]:
    return (make_struct(HEARTBEAT_KEY_SCHEMA, {"serverName": prefix}),
            make_struct(HEARTBEAT_VALUE_SCHEMA, {"ts_ms": ts_ms}))
