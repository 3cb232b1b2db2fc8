"""The registry's in-memory state, rebuilt by applying `_schemas` records in log order.

Everything a read needs is here: schemas by id, subjects and their versions, configs and modes.
Writers never change it directly; they write records and wait until the log reader applied them,
so every instance (leader or not) holds the same state."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from . import records as rec
from .records import Reference, SchemaValue


@dataclass(frozen=True)
class StoredSchema:
    id: int
    schema_type: str
    schema: str
    references: tuple[Reference, ...]

    def content_key(self) -> tuple[str, str, tuple[Reference, ...]]:
        return self.schema_type, self.schema, self.references


class RegistryState:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.schemas: dict[int, StoredSchema] = {}
        self.by_content: dict[tuple[str, str, tuple[Reference, ...]], int] = {}
        self.subjects: dict[str, dict[int, SchemaValue]] = {}
        self.configs: dict[str | None, dict[str, Any]] = {}
        self.modes: dict[str | None, str] = {}
        self.max_id = 0
        self.applied_offset = -1

    # ---- replay ------------------------------------------------------------------------
    def apply(self, offset: int, key: bytes | None, value: bytes | None) -> None:
        with self.lock:
            self._apply(key, value)
            self.applied_offset = max(self.applied_offset, offset)
            self.changed.notify_all()

    def _apply(self, key: bytes | None, value: bytes | None) -> None:
        d = rec.decode(key, value)
        if d is None:
            return
        kt, k, v = d
        subject = k.get("subject")
        if kt == rec.SCHEMA:
            version = k.get("version")
            if not isinstance(subject, str) or not isinstance(version, int):
                return
            versions = self.subjects.setdefault(subject, {})
            if v is None:
                gone = versions.pop(version, None)
                if not versions:
                    del self.subjects[subject]
                if gone is not None and not self.uses_of(gone.id, deleted=True):
                    s = self.schemas.pop(gone.id, None)
                    if s is not None and self.by_content.get(s.content_key()) == s.id:
                        del self.by_content[s.content_key()]
                return
            assert isinstance(v, SchemaValue)
            versions[version] = v
            self.max_id = max(self.max_id, v.id)
            if v.id not in self.schemas:
                s = StoredSchema(v.id, v.schema_type, v.schema, tuple(v.references))
                self.schemas[v.id] = s
                self.by_content.setdefault(s.content_key(), v.id)
        elif kt == rec.CONFIG:
            if v is None:
                self.configs.pop(subject, None)
            elif isinstance(v, dict):
                self.configs[subject] = v
        elif kt == rec.MODE:
            if v is None:
                self.modes.pop(subject, None)
            elif isinstance(v, dict) and isinstance(v.get("mode"), str):
                self.modes[subject] = v["mode"]
        elif kt == rec.ID_FLOOR and isinstance(v, dict):
            self.max_id = max(self.max_id, int(v.get("maxId", 0)))
        elif kt == rec.DELETE_SUBJECT and isinstance(v, dict) and isinstance(subject, str):
            upto = int(v.get("version", 0))
            for ver, sv in self.subjects.get(subject, {}).items():
                if ver <= upto:
                    sv.deleted = True

    # ---- queries (callers hold no lock; each takes it briefly) --------------------------
    def versions(self, subject: str, deleted: bool = False) -> list[SchemaValue]:
        with self.lock:
            vs = self.subjects.get(subject, {})
            return [vs[v] for v in sorted(vs) if deleted or not vs[v].deleted]

    def subject_names(self, deleted: bool = False) -> list[str]:
        with self.lock:
            return sorted(s for s, vs in self.subjects.items()
                          if any(deleted or not v.deleted for v in vs.values()))

    def schema(self, schema_id: int) -> StoredSchema | None:
        return self.schemas.get(schema_id)

    def uses_of(self, schema_id: int, deleted: bool = False) -> list[SchemaValue]:
        with self.lock:
            return [v for s in sorted(self.subjects) for _, v in sorted(self.subjects[s].items())
                    if v.id == schema_id and (deleted or not v.deleted)]

    def referenced_by(self, subject: str, version: int) -> list[int]:
        """Ids of live schema versions whose references name (subject, version)."""
        with self.lock:
            ids = {v.id for vs in self.subjects.values() for v in vs.values() if not v.deleted
                   and any(r.subject == subject and r.version == version for r in v.references)}
            return sorted(ids)

    def wait_applied(self, offset: int, timeout: float) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: self.applied_offset >= offset, timeout)
