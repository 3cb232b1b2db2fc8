"""Helpers the JDBC sink tests share: JsonConverter envelopes (schemas.enable=true), connector
configs, and bounded waits on the target database."""

from __future__ import annotations

import base64
import decimal
import json
import time
from collections.abc import Callable
from typing import Any

import psycopg

JSON = "org.apache.kafka.connect.json.JsonConverter"
JDBC = "io.confluent.connect.jdbc.JdbcSinkConnector"
OFFSETS = "__samsa_connect_offsets"


def field(field_name: str, type_: str, optional: bool = False, **extra: Any) -> dict[str, Any]:
    """A struct field of a JsonConverter schema; `extra` adds name, parameters, ..."""
    return {"field": field_name, "type": type_, "optional": optional, **extra}


def struct(*fields: dict[str, Any], name: str = "row") -> dict[str, Any]:
    return {"type": "struct", "name": name, "optional": False, "fields": list(fields)}


def envelope(schema: dict[str, Any] | None, payload: Any) -> bytes | None:
    if payload is None:
        return None
    return json.dumps({"schema": schema, "payload": payload}).encode()


def decimal_payload(value: decimal.Decimal, scale: int) -> str:
    """JsonConverter's Decimal (decimal.format=BASE64): the unscaled big-endian two's complement."""
    unscaled = int(value.scaleb(scale))
    n = (unscaled.bit_length() + 8) // 8
    return base64.b64encode(unscaled.to_bytes(n, "big", signed=True)).decode()


def json_sink(name: str, url: str, topics: str, **extra: str) -> dict[str, str]:
    return {"name": name, "connector.class": JDBC, "tasks.max": "1", "topics": topics,
            "connection.url": url, "connection.user": "postgres",
            "key.converter": JSON, "key.converter.schemas.enable": "true",
            "value.converter": JSON, "value.converter.schemas.enable": "true", **extra}


def query(dsn: str, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as c:
        cur = c.execute(sql, params)
        return list(cur.fetchall()) if cur.description else []


def stored_progress(dsn: str, connector: str) -> int:
    """Sum of the next offsets the sink stored in PostgreSQL (0 before its first commit)."""
    try:
        rows = query(dsn, f'SELECT coalesce(sum(next_offset), 0) FROM "{OFFSETS}" '
                          "WHERE connector = %s", [connector])
    except (psycopg.errors.UndefinedTable, psycopg.OperationalError):
        return 0
    return int(rows[0][0])


def wait_for(check: Callable[[], Any], timeout: float, what: str,
             detail: Callable[[], str] = lambda: "") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}\n{detail()}")
