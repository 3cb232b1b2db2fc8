"""The row schema of Spark's Kafka source, as a Spark DDL string and as the matching Arrow schema."""

from __future__ import annotations

import pyarrow as pa

BASE_DDL = ("key binary, value binary, topic string, partition int, offset long, "
            "timestamp timestamp, timestampType int")
HEADERS_DDL = "headers array<struct<key:string,value:binary>>"

HEADER_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))

_BASE_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("timestampType", pa.int32()),
]


def ddl(include_headers: bool) -> str:
    return f"{BASE_DDL}, {HEADERS_DDL}" if include_headers else BASE_DDL


def arrow_schema(include_headers: bool) -> pa.Schema:
    fields = list(_BASE_FIELDS)
    if include_headers:
        fields.append(pa.field("headers", HEADER_TYPE))
    return pa.schema(fields)
