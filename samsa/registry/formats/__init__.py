"""Schema formats: parsing (with references), the canonical form stored, and the reader/writer
compatibility check of each format. `parse` is the single entry point."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Protocol

TYPES = ("AVRO", "JSON", "PROTOBUF")


class InvalidSchema(ValueError):
    """The schema does not parse or resolve; the message says why (answered as 42201)."""


@dataclass(frozen=True)
class Dependency:
    """A referenced schema, by the name the referring schema uses for it (Protobuf import path,
    Avro full name or JSON Schema $ref URI). A list of them is in dependency order."""
    name: str
    schema_type: str
    schema: str


class ParsedSchema(Protocol):
    schema_type: str

    def canonical(self) -> str:
        """The string stored and returned by the API."""
        ...

    def identity(self) -> str:
        """Equal for schemas the registry treats as the same (dedup on register and lookup)."""
        ...

    def compatibility(self, writer: ParsedSchema) -> list[str]:
        """Why data written with `writer` cannot be read with this schema (empty: it can)."""
        ...


def parse(schema_type: str, text: str, deps: list[Dependency] | None = None,
          normalize: bool = False) -> ParsedSchema:
    """Parse (cached: register-or-get and lookups send the same schema text again and again)."""
    return _parse(schema_type, text, tuple(deps or ()), normalize)


@functools.lru_cache(maxsize=1024)
def _parse(schema_type: str, text: str, dep_tuple: tuple[Dependency, ...], normalize: bool) -> ParsedSchema:
    deps = list(dep_tuple)
    if schema_type == "AVRO":
        from . import avro_schema
        return avro_schema.parse(text, deps, normalize)
    if schema_type == "JSON":
        from . import json_schema
        return json_schema.parse(text, deps, normalize)
    if schema_type == "PROTOBUF":
        from . import protobuf_schema
        return protobuf_schema.parse(text, deps, normalize)
    raise InvalidSchema(f"unknown schema type {schema_type!r}; supported: {', '.join(TYPES)}")
