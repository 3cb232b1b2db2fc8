"""The registry's operations, independent of HTTP: reads answer from the in-memory state; writes
(leader only) validate, check compatibility, allocate ids and versions and append records to
`_schemas`, serialised by one lock."""

from __future__ import annotations

import threading
from typing import Any, Protocol

from . import compat, errors
from . import records as rec
from .formats import TYPES, Dependency, InvalidSchema, ParsedSchema, parse
from .records import Reference, SchemaValue
from .state import RegistryState, StoredSchema

MODES = ("READWRITE", "READONLY", "IMPORT")
MAX_VERSION = 2**31 - 1


class Store(Protocol):
    def write(self, records: list[tuple[bytes, bytes | None]]) -> None: ...
    def sync(self) -> None: ...


def parse_version(text: str) -> int | None:
    """A version path segment: a number in [1, 2^31-1], or None for "latest" (also -1)."""
    if text in ("latest", "-1"):
        return None
    try:
        v = int(text)
    except ValueError:
        raise errors.invalid_version(text) from None
    if not 1 <= v <= MAX_VERSION:
        raise errors.invalid_version(text)
    return v


class Registry:
    def __init__(self, state: RegistryState, store: Store, default_level: str = compat.DEFAULT_LEVEL) -> None:
        self.state = state
        self.store = store
        self.default_level = default_level
        self._write_lock = threading.Lock()
        self._parsed: dict[int, ParsedSchema] = {}

    # ---- helpers ------------------------------------------------------------------------
    def _deps(self, refs: list[Reference] | tuple[Reference, ...], seen: set[str] | None = None,
              depth: int = 0) -> list[Dependency]:
        """Referenced schemas, transitively, dependencies first."""
        if depth > 32:
            raise errors.invalid_schema("references nest too deeply (cycle?)")
        seen = set() if seen is None else seen
        out: list[Dependency] = []
        for r in refs:
            if r.name in seen:
                continue
            vs = self.state.subjects.get(r.subject, {})
            sv = vs.get(r.version) if r.version != -1 else (vs[max(vs)] if vs else None)
            if sv is None:
                raise errors.invalid_schema(f"reference {r.name!r} to subject {r.subject!r} version "
                                            f"{r.version} not found")
            stored = self.state.schemas[sv.id]
            out += self._deps(stored.references, seen, depth + 1)
            seen.add(r.name)
            out.append(Dependency(r.name, stored.schema_type, stored.schema))
        return out

    def parsed(self, s: StoredSchema) -> ParsedSchema:
        p = self._parsed.get(s.id)
        if p is None:
            try:
                p = parse(s.schema_type, s.schema, self._deps(s.references))
            except InvalidSchema as e:
                raise errors.store_error(f"stored schema {s.id} does not parse: {e}") from None
            self._parsed[s.id] = p
        return p

    def _parse_request(self, body: Any, normalize: bool) -> tuple[ParsedSchema, str, list[Reference]]:
        if not isinstance(body, dict):
            raise errors.unprocessable("The request body must be a JSON object")
        text = body.get("schema")
        stype = body.get("schemaType") or "AVRO"
        if not isinstance(stype, str) or stype.upper() not in TYPES:
            raise errors.invalid_schema(f"unknown schema type {stype!r}; supported: {', '.join(TYPES)}")
        stype = stype.upper()
        if not isinstance(text, str) or not text.strip():
            raise errors.invalid_schema("Empty schema")
        try:
            refs = rec.parse_references(body.get("references"))
        except ValueError as e:
            raise errors.invalid_schema(str(e)) from None
        with self.state.lock:
            deps = self._deps(refs)
        try:
            p = parse(stype, text, deps, normalize)
        except InvalidSchema as e:
            raise errors.invalid_schema(str(e).removeprefix("Invalid schema: ")) from None
        except RecursionError:
            raise errors.invalid_schema("the schema nests too deeply") from None
        return p, stype, refs

    def _same(self, stored: StoredSchema, p: ParsedSchema, stype: str, refs: list[Reference]) -> bool:
        if stored.schema_type != stype or stored.references != tuple(refs):
            return False
        if stored.schema == p.canonical():
            return True
        return self.parsed(stored).identity() == p.identity()

    def _find_in_subject(self, subject: str, p: ParsedSchema, stype: str, refs: list[Reference],
                         deleted: bool) -> SchemaValue | None:
        for sv in reversed(self.state.versions(subject, deleted=deleted)):
            if self._same(self.state.schemas[sv.id], p, stype, refs):
                return sv
        return None

    def _find_id(self, p: ParsedSchema, stype: str, refs: list[Reference]) -> int | None:
        sid = self.state.by_content.get((stype, p.canonical(), tuple(refs)))
        if sid is not None:
            return sid
        if stype != "PROTOBUF":
            return None
        for s in list(self.state.schemas.values()):
            if self._same(s, p, stype, refs):
                return s.id
        return None

    def _version_of(self, subject: str, version: str, deleted: bool = False) -> SchemaValue:
        v = parse_version(version)
        all_versions = self.state.versions(subject, deleted=True)
        if not all_versions:
            raise errors.subject_not_found(subject)
        live = [sv for sv in all_versions if deleted or not sv.deleted]
        if v is None:
            if not live:
                raise errors.subject_not_found(subject)
            return live[-1]
        for sv in live:
            if sv.version == v:
                return sv
        raise errors.version_not_found(v)

    def _format(self, s: StoredSchema, fmt: str | None) -> str:
        if fmt == "serialized" and s.schema_type == "PROTOBUF":
            from .formats.protobuf_schema import ProtobufSchema
            p = self.parsed(s)
            assert isinstance(p, ProtobufSchema)
            return p.serialized()
        return s.schema

    def _schema_json(self, s: StoredSchema, fmt: str | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if s.schema_type != "AVRO":
            out["schemaType"] = s.schema_type
        if s.references:
            out["references"] = [r.to_json() for r in s.references]
        out["schema"] = self._format(s, fmt)
        return out

    def _version_json(self, sv: SchemaValue, fmt: str | None = None) -> dict[str, Any]:
        s = self.state.schemas[sv.id]
        return {"subject": sv.subject, "version": sv.version, "id": sv.id, **self._schema_json(s, fmt)}

    # ---- modes and configs --------------------------------------------------------------
    def mode(self, subject: str | None) -> str:
        if subject is not None and subject in self.state.modes:
            return self.state.modes[subject]
        return self.state.modes.get(None, "READWRITE")

    def level(self, subject: str) -> str:
        cfg = self.state.configs.get(subject) or self.state.configs.get(None) or {}
        return str(cfg.get("compatibilityLevel") or self.default_level)

    def normalize_default(self, subject: str) -> bool:
        cfg = self.state.configs.get(subject) or self.state.configs.get(None) or {}
        return bool(cfg.get("normalize", False))

    def get_config(self, subject: str | None, default_to_global: bool = False) -> dict[str, Any]:
        if subject is None:
            cfg = dict(self.state.configs.get(None) or {})
            cfg.setdefault("compatibilityLevel", self.default_level)
            return cfg
        sub_cfg = self.state.configs.get(subject)
        if sub_cfg is None:
            if not default_to_global:
                raise errors.subject_config_not_found(subject)
            return self.get_config(None)
        return dict(sub_cfg)

    def set_config(self, subject: str | None, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise errors.unprocessable("The request body must be a JSON object")
        level = body.get("compatibility", body.get("compatibilityLevel"))
        if not isinstance(level, str) or level.upper() not in compat.LEVELS:
            raise errors.invalid_compatibility(level)
        value: dict[str, Any] = {"compatibilityLevel": level.upper()}
        if isinstance(body.get("normalize"), bool):
            value["normalize"] = body["normalize"]
        with self._write_lock:
            self.store.write([(rec.config_key(subject), rec.encode_value(value))])
        out: dict[str, Any] = {"compatibility": level.upper()}
        if "normalize" in value:
            out["normalize"] = value["normalize"]
        return out

    def delete_config(self, subject: str | None) -> dict[str, Any]:
        if subject is not None and subject not in self.state.subjects and subject not in self.state.configs:
            raise errors.subject_not_found(subject)
        old = self.get_config(subject, default_to_global=True)
        with self._write_lock:
            self.store.write([(rec.config_key(subject), None)])
        return old

    def get_mode(self, subject: str | None, default_to_global: bool = False) -> dict[str, Any]:
        if subject is None or subject in self.state.modes:
            return {"mode": self.mode(subject)}
        if default_to_global:
            return {"mode": self.mode(None)}
        raise errors.subject_mode_not_found(subject)

    def set_mode(self, subject: str | None, body: Any, force: bool) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise errors.unprocessable("The request body must be a JSON object")
        mode = body.get("mode")
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise errors.invalid_mode(mode)
        mode = mode.upper()
        if mode == "IMPORT" and not force:
            has = self.state.versions(subject) if subject is not None else self.state.subject_names()
            if has:
                raise errors.not_permitted("Cannot import since found existing subjects")
        with self._write_lock:
            self.store.write([(rec.mode_key(subject), rec.encode_value({"mode": mode}))])
        return {"mode": mode}

    def delete_mode(self, subject: str) -> dict[str, Any]:
        old = self.get_mode(subject)
        with self._write_lock:
            self.store.write([(rec.mode_key(subject), None)])
        return old

    def _check_writable(self, subject: str) -> str:
        mode = self.mode(subject)
        if mode == "READONLY":
            raise errors.not_permitted(f"Subject {subject} is in read-only mode")
        return mode

    # ---- reads --------------------------------------------------------------------------
    def subjects(self, deleted: bool = False, prefix: str = "") -> list[str]:
        return [s for s in self.state.subject_names(deleted) if s.startswith(prefix)]

    def versions(self, subject: str, deleted: bool = False) -> list[int]:
        vs = self.state.versions(subject, deleted)
        if not vs:
            raise errors.subject_not_found(subject)
        return [v.version for v in vs]

    def get_version(self, subject: str, version: str, deleted: bool = False,
                    fmt: str | None = None) -> dict[str, Any]:
        return self._version_json(self._version_of(subject, version, deleted), fmt)

    def get_version_schema(self, subject: str, version: str, deleted: bool = False) -> str:
        sv = self._version_of(subject, version, deleted)
        return self.state.schemas[sv.id].schema

    def get_schema(self, schema_id: int, fmt: str | None = None) -> dict[str, Any]:
        s = self.state.schema(schema_id)
        if s is None:
            raise errors.schema_not_found(schema_id)
        return self._schema_json(s, fmt)

    def list_schemas(self, deleted: bool = False, prefix: str = "", latest_only: bool = False,
                     offset: int = 0, limit: int = -1) -> list[dict[str, Any]]:
        out = []
        for subject in self.state.subject_names(deleted):
            if not subject.startswith(prefix):
                continue
            vs = self.state.versions(subject, deleted)
            for sv in vs[-1:] if latest_only else vs:
                out.append(self._version_json(sv))
        return out[offset:] if limit < 0 else out[offset:offset + limit]

    def schema_versions(self, schema_id: int, deleted: bool = False) -> list[dict[str, Any]]:
        if self.state.schema(schema_id) is None:
            raise errors.schema_not_found(schema_id)
        return [{"subject": v.subject, "version": v.version} for v in self.state.uses_of(schema_id, deleted)]

    def schema_subjects(self, schema_id: int, deleted: bool = False) -> list[str]:
        return sorted({v["subject"] for v in self.schema_versions(schema_id, deleted)})

    def referenced_by(self, subject: str, version: str) -> list[int]:
        sv = self._version_of(subject, version)
        return self.state.referenced_by(subject, sv.version)

    def lookup(self, subject: str, body: Any, normalize: bool, deleted: bool = False) -> dict[str, Any]:
        p, stype, refs = self._parse_request(body, normalize or self.normalize_default(subject))
        if not self.state.versions(subject, deleted=True):
            raise errors.subject_not_found(subject)
        sv = self._find_in_subject(subject, p, stype, refs, deleted)
        if sv is None:
            raise errors.schema_not_found()
        return self._version_json(sv)

    def test_compatibility(self, subject: str, version: str | None, body: Any, verbose: bool,
                           normalize: bool = False) -> dict[str, Any]:
        p, stype, _ = self._parse_request(body, normalize)
        level = self.level(subject)
        live = self.state.versions(subject)
        if version is None:
            previous = live
        else:
            previous = [self._version_of(subject, version)]
            if level.endswith("_TRANSITIVE"):
                level = level.removesuffix("_TRANSITIVE")
        prev = [(sv.version, self.parsed(self.state.schemas[sv.id])) for sv in previous]
        messages = compat.check(level, p, prev)
        out: dict[str, Any] = {"is_compatible": not messages}
        if verbose:
            out["messages"] = messages
        return out

    # ---- writes -------------------------------------------------------------------------
    def register(self, subject: str, body: Any, normalize: bool) -> dict[str, Any]:
        mode = self._check_writable(subject)
        want_id = body.get("id") if isinstance(body, dict) else None
        want_version = body.get("version") if isinstance(body, dict) else None
        if want_id is not None and mode != "IMPORT":
            raise errors.not_permitted(f"Overwrite new schema with id {want_id} is not permitted.")
        p, stype, refs = self._parse_request(body, normalize or self.normalize_default(subject))
        if want_id is None:  # register-or-get: an already registered schema needs no write
            found = self._find_in_subject(subject, p, stype, refs, deleted=False)
            if found is not None:
                return {"id": found.id}
        with self._write_lock:
            self.store.sync()
            existing = self._find_in_subject(subject, p, stype, refs, deleted=False)
            if existing is not None and want_id in (None, existing.id):
                return {"id": existing.id}
            if mode != "IMPORT":
                live = self.state.versions(subject)
                prev = [(sv.version, self.parsed(self.state.schemas[sv.id])) for sv in live]
                messages = compat.check(self.level(subject), p, prev)
                if messages:
                    raise errors.incompatible(subject, messages)
            sid = self._find_id(p, stype, refs)
            if want_id is not None:
                if not isinstance(want_id, int) or isinstance(want_id, bool) or want_id < 1:
                    raise errors.unprocessable(f"Invalid schema id {want_id!r}")
                other = self.state.schema(want_id)
                if other is not None and not self._same(other, p, stype, refs):
                    raise errors.not_permitted(f"Overwrite new schema with id {want_id} is not permitted.")
                sid = want_id
            if sid is None:
                sid = self.state.max_id + 1
            all_versions = self.state.versions(subject, deleted=True)
            version = (all_versions[-1].version + 1) if all_versions else 1
            if want_version is not None:
                if not isinstance(want_version, int) or not 1 <= want_version <= MAX_VERSION:
                    raise errors.invalid_version(str(want_version))
                version = want_version
            value = SchemaValue(subject=subject, version=version, id=sid, schema=p.canonical(),
                                schema_type=stype, references=refs)
            self.store.write([(rec.schema_key(subject, version), rec.encode_value(value))])
        return {"id": sid}

    def _referenced(self, subject: str, versions: list[int]) -> None:
        for v in versions:
            ids = self.state.referenced_by(subject, v)
            if ids:
                raise errors.reference_exists(f"One or more references exist to the schema "
                                              f"{{subject={subject},version={v}}} (schema ids {ids})")

    def delete_subject(self, subject: str, permanent: bool) -> list[int]:
        self._check_writable(subject)
        with self._write_lock:
            self.store.sync()
            everything = self.state.versions(subject, deleted=True)
            if not everything:
                raise errors.subject_not_found(subject)
            live = [sv for sv in everything if not sv.deleted]
            if permanent:
                if live:
                    raise errors.subject_not_soft_deleted(subject)
                self._referenced(subject, [sv.version for sv in everything])
                writes = [(rec.id_floor_key(), rec.encode_value({"maxId": self.state.max_id}))]
                writes += [(rec.schema_key(subject, sv.version), None) for sv in everything]
                self.store.write(writes)
                return [sv.version for sv in everything]
            if not live:
                raise errors.subject_soft_deleted(subject)
            self._referenced(subject, [sv.version for sv in live])
            writes = []
            for sv in live:
                gone = SchemaValue(sv.subject, sv.version, sv.id, sv.schema, sv.schema_type,
                                   list(sv.references), deleted=True)
                writes.append((rec.schema_key(subject, sv.version), rec.encode_value(gone)))
            writes.append((rec.delete_subject_key(subject),
                           rec.encode_value({"subject": subject, "version": live[-1].version})))
            self.store.write(writes)
            return [sv.version for sv in live]

    def delete_version(self, subject: str, version: str, permanent: bool) -> int:
        self._check_writable(subject)
        v = parse_version(version)
        with self._write_lock:
            self.store.sync()
            everything = self.state.versions(subject, deleted=True)
            if not everything:
                raise errors.subject_not_found(subject)
            if v is None:
                live = [sv for sv in everything if not sv.deleted]
                if not live:
                    raise errors.subject_not_found(subject)
                sv = live[-1] if not permanent else everything[-1]
            else:
                found = [x for x in everything if x.version == v]
                if not found:
                    raise errors.version_not_found(v)
                sv = found[0]
            if permanent:
                if not sv.deleted:
                    raise errors.version_not_soft_deleted(subject, sv.version)
                self._referenced(subject, [sv.version])
                self.store.write([(rec.id_floor_key(), rec.encode_value({"maxId": self.state.max_id})),
                                  (rec.schema_key(subject, sv.version), None)])
                return sv.version
            if sv.deleted:
                raise errors.version_soft_deleted(subject, sv.version)
            self._referenced(subject, [sv.version])
            gone = SchemaValue(sv.subject, sv.version, sv.id, sv.schema, sv.schema_type,
                               list(sv.references), deleted=True)
            self.store.write([(rec.schema_key(subject, sv.version), rec.encode_value(gone))])
            return sv.version
