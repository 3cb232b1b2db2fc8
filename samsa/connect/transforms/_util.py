"""What the built-in transforms share: Kafka's `Requirements` checks (same DataException wording),
schema copying, the key/value split every `$Key` / `$Value` pair has, and config parsing."""

from __future__ import annotations

import re
from abc import abstractmethod
from typing import Any

from ..api import Transformation
from ..config_def import ConfigDef, ConfigType, Importance
from ..data import ConnectRecord, Schema, SinkRecord, Struct, Type
from ..errors import ConfigException, DataException

REPLACE_NULL_WITH_DEFAULT = "replace.null.with.default"


def type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def require_schema(schema: Schema | None, purpose: str) -> Schema:
    if schema is None:
        raise DataException(f"Schema required for [{purpose}]")
    return schema


def require_map(value: Any, purpose: str) -> dict[Any, Any]:
    if not isinstance(value, dict):
        raise DataException(f"Only Map objects supported in absence of schema for [{purpose}], "
                            f"found: {type_name(value)}")
    return value


def require_map_or_null(value: Any, purpose: str) -> dict[Any, Any] | None:
    return None if value is None else require_map(value, purpose)


def require_struct(value: Any, purpose: str) -> Struct:
    if not isinstance(value, Struct):
        raise DataException(f"Only Struct objects supported for [{purpose}], found: {type_name(value)}")
    return value


def require_struct_or_null(value: Any, purpose: str) -> Struct | None:
    return None if value is None else require_struct(value, purpose)


def require_sink(record: ConnectRecord, purpose: str) -> SinkRecord:
    if not isinstance(record, SinkRecord):
        raise DataException(f"Only SinkRecord supported for [{purpose}], found: {type_name(record)}")
    return record


def field_value(struct: Struct, name: str, replace_null_with_default: bool = True) -> Any:
    """A struct field's value; a null one becomes the field's default only when asked (KIP-1040)."""
    value = struct.get_without_default(name)
    if value is None and replace_null_with_default:
        f = struct.schema.field(name)
        return f.schema.default if f is not None else None
    return value


def struct_with_fields(base: Schema, fields: list[tuple[str, Schema]]) -> Schema:
    """A required struct schema with `base`'s name, version, doc and parameters and these fields
    (Kafka's SchemaUtil.copySchemaBasics, which does not copy optionality or the default)."""
    from ..data import Field
    return Schema(Type.STRUCT, name=base.name, version=base.version,
                  doc=base.doc, parameters=base.parameters,
                  fields=tuple(Field(n, i, s) for i, (n, s) in enumerate(fields)))


def copy_basics(base: Schema, target: Schema) -> Schema:
    """`target` with `base`'s name, version, doc and parameters."""
    return target.with_(name=base.name, version=base.version, doc=base.doc, parameters=base.parameters)


def parse_config(definition: ConfigDef, props: dict[str, Any]) -> dict[str, Any]:
    """Typed values of a transform's props (its SimpleConfig)."""
    return definition.parse({k: v for k, v in props.items() if v is not None})


def define_replace_null(definition: ConfigDef) -> ConfigDef:
    return definition.define(REPLACE_NULL_WITH_DEFAULT, ConfigType.BOOLEAN, True, None, Importance.MEDIUM,
                             "Whether to replace fields that have a default value and that are null "
                             "to the default value. When set to true, the default value is used, "
                             "otherwise null is used.")


def non_empty_list(name: str, value: Any) -> None:
    if not value:
        raise ConfigException(name, value, "Empty list")


def non_blank_list(name: str, value: Any) -> None:
    non_empty_list(name, value)
    for item in value:
        if not str(item).strip():
            raise ConfigException(name, value, "Blank items are not allowed")


class KeyOrValue(Transformation):
    """A transform that works on either the key or the value of a record: subclasses say which by
    mixing in `OnKey` or `OnValue` (Kafka's `$Key` / `$Value` nested classes)."""

    @abstractmethod
    def operating_schema(self, record: ConnectRecord) -> Schema | None: ...

    @abstractmethod
    def operating_value(self, record: ConnectRecord) -> Any: ...

    @abstractmethod
    def new_record(self, record: ConnectRecord, schema: Schema | None, value: Any) -> ConnectRecord: ...


class OnKey:
    def operating_schema(self, record: ConnectRecord) -> Schema | None:
        return record.key_schema

    def operating_value(self, record: ConnectRecord) -> Any:
        return record.key

    def new_record(self, record: ConnectRecord, schema: Schema | None, value: Any) -> ConnectRecord:
        return record.new_record(key_schema=schema, key=value)  # type: ignore[no-any-return]


class OnValue:
    def operating_schema(self, record: ConnectRecord) -> Schema | None:
        return record.value_schema

    def operating_value(self, record: ConnectRecord) -> Any:
        return record.value

    def new_record(self, record: ConnectRecord, schema: Schema | None, value: Any) -> ConnectRecord:
        return record.new_record(value_schema=schema, value=value)  # type: ignore[no-any-return]


class SchemaCache:
    """A small bounded cache of derived schemas (Kafka keeps an LRU of 16 per transform)."""

    def __init__(self, size: int = 16) -> None:
        self._size = size
        self._items: dict[Schema, Schema] = {}

    def get(self, key: Schema) -> Schema | None:
        return self._items.get(key)

    def put(self, key: Schema, value: Schema) -> Schema:
        if len(self._items) >= self._size:
            self._items.pop(next(iter(self._items)))
        self._items[key] = value
        return value


# ---- Java regular expressions -------------------------------------------------------------------
_JAVA_NAMED_GROUP = re.compile(r"(?<!\\)\(\?<([A-Za-z][A-Za-z0-9]*)>")


def java_regex(pattern: str) -> re.Pattern[str]:
    """A java.util.regex pattern compiled with Python's `re` (named groups `(?<n>...)` become
    `(?P<n>...)`); ConfigException-free: callers turn re.error into their own error."""
    return re.compile(_JAVA_NAMED_GROUP.sub(r"(?P<\1>", pattern))


def java_expand(match: re.Match[str], replacement: str) -> str:
    """Matcher.appendReplacement's expansion: `$n` / `${name}` group references and `\\x`
    escapes; an unmatched group adds nothing. ValueError on an illegal reference."""
    out: list[str] = []
    i, n = 0, len(replacement)
    groups = match.re.groups
    while i < n:
        c = replacement[i]
        if c == "\\":
            if i + 1 >= n:
                raise ValueError("character to be escaped is missing")
            out.append(replacement[i + 1])
            i += 2
        elif c == "$":
            i += 1
            if i >= n:
                raise ValueError("Illegal group reference: group index is missing")
            if replacement[i] == "{":
                end = replacement.find("}", i)
                if end < 0:
                    raise ValueError("named capturing group is missing trailing '}'")
                name = replacement[i + 1:end]
                if name not in match.re.groupindex:
                    raise ValueError(f"No group with name {{{name}}}")
                out.append(match.group(name) or "")
                i = end + 1
            else:
                if not replacement[i].isdigit():
                    raise ValueError("Illegal group reference")
                ref = int(replacement[i])
                i += 1
                while i < n and replacement[i].isdigit() and ref * 10 + int(replacement[i]) <= groups:
                    ref = ref * 10 + int(replacement[i])
                    i += 1
                if ref > groups:
                    raise ValueError(f"No group {ref}")
                out.append(match.group(ref) or "")
        else:
            out.append(c)
            i += 1
    return "".join(out)
