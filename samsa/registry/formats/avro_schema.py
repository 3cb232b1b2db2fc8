"""Avro: parsed with the Apache `avro` library (named types from references registered first),
defaults validated with fastavro, compatibility by Avro's reader/writer schema resolution."""

from __future__ import annotations

import json
from typing import Any

import avro.errors
import avro.name
import avro.schema
from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType
from fastavro.validation import validate

from . import Dependency, InvalidSchema, ParsedSchema


class AvroSchema:
    schema_type = "AVRO"

    def __init__(self, raw: Any, parsed: avro.schema.Schema, normalize: bool) -> None:
        self.raw = raw
        self.parsed = parsed
        self._canonical = json.dumps(raw, separators=(",", ":"), sort_keys=normalize)

    def canonical(self) -> str:
        return self._canonical

    def identity(self) -> str:
        return self._canonical

    def compatibility(self, writer: ParsedSchema) -> list[str]:
        if not isinstance(writer, AvroSchema):
            return [f"schema type changed from {writer.schema_type} to AVRO"]
        res = ReaderWriterCompatibilityChecker().get_compatibility(self.parsed, writer.parsed)
        if res.compatibility is SchemaCompatibilityType.compatible:
            return []
        locations = sorted(res.locations) or ["/"]
        kinds = sorted({i.name.upper() for i in res.incompatibilities})
        detail = ", ".join(sorted(str(m) for m in res.messages))
        return [f"{'/'.join(kinds)} at {', '.join(locations)}: {detail}"]


def _load(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as e:
        # a bare primitive name ("string") is legal Avro text too
        if text.strip() in ("null", "boolean", "int", "long", "float", "double", "bytes", "string"):
            return text.strip()
        raise InvalidSchema(f"Invalid Avro schema: not valid JSON ({e})") from None


def _check_defaults(node: Any, names: avro.name.Names) -> None:
    """Confluent rejects record fields whose default does not match their type."""
    if isinstance(node, list):
        for n in node:
            _check_defaults(n, names)
        return
    if not isinstance(node, dict):
        return
    if node.get("type") == "record" and isinstance(node.get("fields"), list):
        for f in node["fields"]:
            if isinstance(f, dict) and "default" in f:
                ftype = f.get("type")
                check_type = ftype[0] if isinstance(ftype, list) and ftype else ftype
                if isinstance(check_type, str) and check_type not in _PRIMITIVES:
                    continue  # a named type: avro resolves it; fastavro would need the whole tree
                try:
                    ok = validate(f["default"], check_type, raise_errors=False)  # type: ignore[arg-type]
                except Exception:
                    ok = True
                if not ok:
                    raise InvalidSchema(f"Invalid default for field {f.get('name')}: {f['default']!r} "
                                        f"not a {json.dumps(ftype)}")
            if isinstance(f, dict):
                _check_defaults(f.get("type"), names)
    for k in ("items", "values", "type"):
        if isinstance(node.get(k), (dict, list)):
            _check_defaults(node[k], names)


_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}


def parse(text: str, deps: list[Dependency], normalize: bool) -> AvroSchema:
    names = avro.name.Names()
    try:
        for d in deps:
            if d.schema_type != "AVRO":
                raise InvalidSchema(f"reference {d.name} is a {d.schema_type} schema, not AVRO")
            avro.schema.make_avsc_object(_load(d.schema), names)
        raw = _load(text)
        parsed = avro.schema.make_avsc_object(raw, names)
    except InvalidSchema:
        raise
    except (avro.errors.AvroException, TypeError, KeyError, AttributeError, ValueError) as e:
        raise InvalidSchema(f"Invalid Avro schema: {e}") from None
    _check_defaults(raw, names)
    return AvroSchema(raw, parsed, normalize)
