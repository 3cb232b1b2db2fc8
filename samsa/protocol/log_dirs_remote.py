"""DescribeLogDirs with each partition's remote (tiered) size as a tagged field.

Kafka's DescribeLogDirs reports only the local size (`partition_size`); KIP-1187, still under
discussion, proposes a remote size. Samsa adds it as a tagged field of DescribeLogDirsPartition in
the flexible versions (v2+), under a tag far above Kafka's own: clients that do not know the tag
skip it (the protocol's rule for tagged fields), `samsa log-dirs describe` prints it. The schema
classes are kio's with the one field added (no `from __future__ import annotations` here: kio
reads the field types at run time).
"""

import importlib
import struct
from dataclasses import dataclass, field, fields
from functools import cache
from typing import Any

from kio.index import load_response_schema
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i64

from .codec import Chunks, build

REMOTE_SIZE_TAG = 10000
FIRST_VERSION = 2  # the first flexible version of DescribeLogDirs


def _derive(base: type, name: str, extra: dict[str, tuple[Any, Any]]) -> type:
    """A frozen kio entity like `base` with fields added or retyped: {name: (type, field)}."""
    ns: dict[str, Any] = {"__annotations__": {k: t for k, (t, _f) in extra.items()},
                          "__module__": __name__, "__qualname__": name}
    for k, (_t, f) in extra.items():
        ns[k] = f
    return dataclass(frozen=True, slots=True, kw_only=True)(type(name, (base,), ns))


def _field_like(base: type, name: str) -> Any:
    f = next(f for f in fields(base) if f.name == name)
    return field(metadata=dict(f.metadata))


@cache
def schema(version: int) -> tuple[type, type]:
    """(response class, partition class) of this DescribeLogDirs version with the remote size."""
    mod = importlib.import_module(f"kio.schema.describe_log_dirs.v{version}.response")
    part = _derive(mod.DescribeLogDirsPartition, "DescribeLogDirsPartitionRemote", {
        "remote_size": (i64, field(default=i64(-1),
                                   metadata={"kafka_type": "int64", "tag": REMOTE_SIZE_TAG}))})
    topic = _derive(mod.DescribeLogDirsTopic, "DescribeLogDirsTopicRemote", {
        "partitions": (tuple[part, ...], _field_like(mod.DescribeLogDirsTopic,  # type: ignore[valid-type]
                                                     "partitions"))})
    result = _derive(mod.DescribeLogDirsResult, "DescribeLogDirsResultRemote", {
        "topics": (tuple[topic, ...], _field_like(mod.DescribeLogDirsResult,  # type: ignore[valid-type]
                                                  "topics"))})
    resp = _derive(mod.DescribeLogDirsResponse, "DescribeLogDirsResponseRemote", {
        "results": (tuple[result, ...], _field_like(mod.DescribeLogDirsResponse,  # type: ignore[valid-type]
                                                    "results"))})
    return resp, part


@cache
def writer(version: int) -> Any:
    return entity_writer(schema(version)[0])


@cache
def reader(version: int) -> Any:
    return entity_reader(schema(version)[0])


def encode(version: int, correlation_id: int, data: dict[str, Any]) -> list[bytes]:
    """A DescribeLogDirs response frame (as chunks) whose partitions may carry `remote_size`."""
    hdr_cls = load_response_schema(35, version).__header_schema__
    out = Chunks()
    out.append(b"")
    entity_writer(hdr_cls)(out, build(hdr_cls, {"correlation_id": correlation_id}))  # type: ignore[arg-type]
    writer(version)(out, build(schema(version)[0], data))
    out[0] = struct.pack(">i", sum(len(c) for c in out))
    return out
