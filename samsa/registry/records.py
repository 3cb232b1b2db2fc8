"""The `_schemas` topic's record format: Confluent Schema Registry's own JSON keys and values, so
the topic reads the same to tools that know Confluent's layout.

Keys (JSON, fields in Confluent's order):
  {"keytype":"SCHEMA","subject":S,"version":V,"magic":1}  value: the version (null = permanently deleted)
  {"keytype":"CONFIG","subject":S|null,"magic":0}         value: {"compatibilityLevel":L} (null = removed)
  {"keytype":"MODE","subject":S|null,"magic":0}           value: {"mode":M} (null = removed)
  {"keytype":"DELETE_SUBJECT","subject":S,"magic":0}      value: {"subject":S,"version":V} (informational)
  {"keytype":"NOOP","magic":0}                            value: null (a marker written to find the log end)
One Samsa addition: {"keytype":"SAMSA_ID_FLOOR","magic":0} value {"maxId":N}, written before permanent
deletes so that compaction of their tombstones never lets a schema id be handed out twice.

Pure JSON: the broker imports this module to read the topic for schema-validated topics.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

TOPIC = "_schemas"
SCHEMA = "SCHEMA"
CONFIG = "CONFIG"
MODE = "MODE"
DELETE_SUBJECT = "DELETE_SUBJECT"
NOOP = "NOOP"
ID_FLOOR = "SAMSA_ID_FLOOR"


def _dump(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


@dataclass(frozen=True)
class Reference:
    name: str
    subject: str
    version: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass
class SchemaValue:
    subject: str
    version: int
    id: int
    schema: str
    schema_type: str = "AVRO"
    references: list[Reference] = field(default_factory=list)
    deleted: bool = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"subject": self.subject, "version": self.version, "id": self.id}
        if self.schema_type != "AVRO":
            out["schemaType"] = self.schema_type
        if self.references:
            out["references"] = [r.to_json() for r in self.references]
        out["schema"] = self.schema
        out["deleted"] = self.deleted
        return out


def schema_key(subject: str, version: int) -> bytes:
    return _dump({"keytype": SCHEMA, "subject": subject, "version": version, "magic": 1})


def config_key(subject: str | None) -> bytes:
    return _dump({"keytype": CONFIG, "subject": subject, "magic": 0})


def mode_key(subject: str | None) -> bytes:
    return _dump({"keytype": MODE, "subject": subject, "magic": 0})


def delete_subject_key(subject: str) -> bytes:
    return _dump({"keytype": DELETE_SUBJECT, "subject": subject, "magic": 0})


def noop_key() -> bytes:
    return _dump({"keytype": NOOP, "magic": 0})


def id_floor_key() -> bytes:
    return _dump({"keytype": ID_FLOOR, "magic": 0})


def encode_value(obj: dict[str, Any] | SchemaValue | None) -> bytes | None:
    if obj is None:
        return None
    return _dump(obj.to_json() if isinstance(obj, SchemaValue) else obj)


def parse_references(raw: Any) -> list[Reference]:
    """References from a request or a record; raises ValueError on a malformed list."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ValueError("references must be a list")
    out = []
    for r in raw:
        if not isinstance(r, dict) or not isinstance(r.get("name"), str) or \
                not isinstance(r.get("subject"), str) or not isinstance(r.get("version"), int) \
                or isinstance(r.get("version"), bool):
            raise ValueError(f"invalid reference {r!r}: expected name, subject and version")
        out.append(Reference(r["name"], r["subject"], r["version"]))
    return out


def decode(key: bytes | None, value: bytes | None) -> tuple[str, dict[str, Any], Any] | None:
    """(keytype, key dict, value) with the value parsed (SchemaValue for SCHEMA records, dict or
    None otherwise); None for records this module does not understand."""
    if not key:
        return None
    try:
        k = json.loads(key)
        v = json.loads(value) if value else None
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(k, dict) or not isinstance(k.get("keytype"), str):
        return None
    kt = k["keytype"]
    if kt == SCHEMA and v is not None:
        try:
            v = SchemaValue(subject=v["subject"], version=int(v["version"]), id=int(v["id"]),
                            schema=v["schema"], schema_type=v.get("schemaType") or "AVRO",
                            references=parse_references(v.get("references")),
                            deleted=bool(v.get("deleted", False)))
        except (KeyError, TypeError, ValueError):
            return None
    return kt, k, v
