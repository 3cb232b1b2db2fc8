"""Schema-validated topics (Confluent Server's confluent.key/value.schema.validation): the broker
rejects records whose key or value is not in the schema-registry wire format (magic byte 0, a
4-byte schema id, the payload) or whose id is not registered under the topic's subject
(TopicNameStrategy: `<topic>-key` / `<topic>-value`).

The broker learns the registered ids by reading the `_schemas` log it owns, catching up lazily
on the first produce to a validated topic after a change. Topics without the configs cost one
dict lookup per produced partition and decode nothing."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from samsa.protocol import codecs
from samsa.protocol.batch import HEADER_SIZE, read_header
from samsa.protocol.records import decode_batch, iter_batches, read_varint

from . import records as rec

KEY_CONFIG = "confluent.key.schema.validation"
VALUE_CONFIG = "confluent.value.schema.validation"


@dataclass
class Rejection:
    message: str
    record_errors: tuple[dict[str, Any], ...]


class SchemaIds:
    """subject -> {version: (schema id, deleted)}, from the `_schemas` log."""

    def __init__(self, logs: Any, topic: str) -> None:
        self.logs = logs
        self.topic = topic
        self.offset = 0
        self.subjects: dict[str, dict[int, tuple[int, bool]]] = {}
        self.known_ids: set[int] = set()

    def catch_up(self) -> None:
        lg = self.logs.get(self.topic, 0)
        if lg is None:
            return
        self.offset = max(self.offset, lg.log_start_offset)
        while self.offset < lg.end_offset:
            data = lg.read(self.offset, 1 << 20)
            if not data:
                break
            progressed = False
            for pos, _ in iter_batches(data):
                for r in decode_batch(data, pos):
                    if r.offset >= self.offset:
                        self._apply(r.key, r.value)
                        self.offset = r.offset + 1
                        progressed = True
            if not progressed:
                break

    def _apply(self, key: bytes | None, value: bytes | None) -> None:
        d = rec.decode(key, value)
        if d is None or d[0] != rec.SCHEMA:
            return
        _, k, v = d
        subject, version = k.get("subject"), k.get("version")
        if not isinstance(subject, str) or not isinstance(version, int):
            return
        versions = self.subjects.setdefault(subject, {})
        if v is None:
            versions.pop(version, None)
        else:
            versions[version] = (v.id, v.deleted)
            self.known_ids.add(v.id)

    def registered(self, subject: str, schema_id: int) -> bool:
        return any(i == schema_id and not deleted
                   for i, deleted in self.subjects.get(subject, {}).values())

    def problem(self, data: bytes | None, subject: str) -> str | None:
        if data is None:
            return None  # tombstones carry no schema
        if len(data) < 5 or data[0] != 0:
            return "the payload is not in the schema registry wire format (magic byte 0 + schema id)"
        sid = int.from_bytes(data[1:5], "big")
        if self.registered(subject, sid):
            return None
        self.catch_up()  # registered just now?
        if self.registered(subject, sid):
            return None
        if sid not in self.known_ids:
            return f"schema id {sid} is unknown to the schema registry"
        return f"schema id {sid} is not registered under subject {subject}"


SchemaCheck = Callable[[bytes], Rejection | None]

_indexes: weakref.WeakKeyDictionary[Any, SchemaIds] = weakref.WeakKeyDictionary()


def _index(broker: Any) -> SchemaIds:
    ids = _indexes.get(broker)
    if ids is None:
        topic = broker.config.get("schema.registry.topic") or rec.TOPIC
        ids = _indexes[broker] = SchemaIds(broker.logs, topic)
        ids.catch_up()
    return ids


def checker(broker: Any, topic: str) -> SchemaCheck | None:
    """The validation to run on each batch produced to `topic`, or None when it has none."""
    t = broker.controller.image.topics.get(topic)
    if t is None or not t.configs:
        return None
    key_on = t.configs.get(KEY_CONFIG, "false").lower() == "true"
    value_on = t.configs.get(VALUE_CONFIG, "false").lower() == "true"
    if not (key_on or value_on):
        return None
    ids = _index(broker)
    return lambda records: validate(ids, topic, records, key_on, value_on)


def _fields(records: bytes) -> list[tuple[bytes | None, bytes | None]]:
    """(key, first 5 bytes of the value) of each record, without building Record objects."""
    h = read_header(records)
    payload = codecs.decompress(h.compression, memoryview(records)[HEADER_SIZE:h.size])
    out: list[tuple[bytes | None, bytes | None]] = []
    p = 0
    for _ in range(h.records_count):
        length, p = read_varint(payload, p)
        end = p + length
        p += 1  # attributes
        _, p = read_varint(payload, p)  # timestamp delta
        _, p = read_varint(payload, p)  # offset delta
        klen, p = read_varint(payload, p)
        key = bytes(payload[p:p + klen]) if klen >= 0 else None
        p += max(klen, 0)
        vlen, p = read_varint(payload, p)
        value = bytes(payload[p:p + min(vlen, 5)]) if vlen >= 0 else None
        if end > len(payload) or p + max(vlen, 0) > end:
            raise ValueError("record overruns its batch")
        out.append((key, value))
        p = end
    return out


def validate(ids: SchemaIds, topic: str, records: bytes, key_on: bool,
             value_on: bool) -> Rejection | None:
    try:
        recs = _fields(records)
    except Exception:
        return Rejection("record batch does not decode", ())
    errs: list[dict[str, Any]] = []
    seen: dict[tuple[str, bytes | None], str | None] = {}  # one check per distinct schema id
    for i, (key, value) in enumerate(recs):
        for on, data, what in ((key_on, key, "key"), (value_on, value, "value")):
            if not on:
                continue
            head = data[:5] if data is not None and len(data) >= 5 else data
            memo = (what, head)
            if memo not in seen:
                seen[memo] = ids.problem(head, f"{topic}-{what}")
            why = seen[memo]
            if why is not None:
                errs.append({"batch_index": i, "batch_index_error_message":
                             f"Record {what} failed schema validation for topic {topic}: {why}"})
                break
    if not errs:
        return None
    shown = ", ".join(f"RecordError(batchIndex={e['batch_index']}, message='"
                      f"{e['batch_index_error_message']}')" for e in errs[:3])
    return Rejection(f"One or more records have been rejected due to {len(errs)} record errors in total, "
                     f"and only showing the first three errors at most: [{shown}]", tuple(errs))
