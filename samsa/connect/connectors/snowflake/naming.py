"""Table names from topic names, the way Snowflake's Kafka connector derives them: a topic that is
a valid unquoted identifier is the table name; `snowflake.topic2table.map` overrides (also with
`REGEX_MATCHER>` patterns); any other topic has each invalid character replaced by `_` and
`_<hash>` appended (Java's String.hashCode, made non-negative), so two topics that differ only in
punctuation do not share a table."""

from __future__ import annotations

import re

from ...errors import ConfigException

TOPIC2TABLE_MAP = "snowflake.topic2table.map"
REGEX_PREFIX = "REGEX_MATCHER>"
_IDENTIFIER = re.compile(r"^[_a-zA-Z][_$a-zA-Z0-9]+$")
_TABLE = re.compile(r"^([_a-zA-Z][_$a-zA-Z0-9]+\.){0,2}[_a-zA-Z][_$a-zA-Z0-9]+$")
_FIRST_OK = re.compile(r"[_a-zA-Z]")
_REST_OK = re.compile(r"[_$a-zA-Z0-9]")


def java_string_hash(text: str) -> int:
    """Java's String.hashCode: s[0]*31^(n-1) + ... over UTF-16 code units, in 32-bit ints."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def java_abs(n: int) -> int:
    """Math.abs on an int: Integer.MIN_VALUE stays negative, as in Java."""
    return n if n == -(1 << 31) else abs(n)


def is_valid_identifier(name: str) -> bool:
    return bool(_IDENTIFIER.match(name))


def is_valid_table_name(name: str) -> bool:
    """A table name the map may name: `[db.][schema.]table`, each part an identifier."""
    return bool(_TABLE.match(name))


def parse_topic2table(text: str | None) -> dict[str, str]:
    """`topic1:table1,topic2:table2` (Snowflake's format) -> {topic: table}. ConfigException on a
    malformed entry, an invalid table name or a topic given twice."""
    out: dict[str, str] = {}
    if not text or not text.strip():
        return out
    for entry in text.split(","):
        parts = entry.split(":")
        if len(parts) != 2 or not parts[0].strip() or not parts[1].strip():
            raise ConfigException(TOPIC2TABLE_MAP, text,
                                  f"Invalid {TOPIC2TABLE_MAP} config format: expected "
                                  f"topic1:table1,topic2:table2, got entry {entry!r}")
        topic, table = parts[0].strip(), parts[1].strip()
        if not topic.startswith(REGEX_PREFIX) and not is_valid_table_name(table):
            raise ConfigException(TOPIC2TABLE_MAP, text,
                                  f"table name {table} should have at least 2 characters, start "
                                  f"with _a-zA-Z, and only contain _$a-zA-Z0-9")
        if topic in out:
            raise ConfigException(TOPIC2TABLE_MAP, text, f"topic name {topic} is duplicated")
        out[topic] = table
    return out


def table_name(topic: str, topic2table: dict[str, str] | None = None) -> str:
    """The Snowflake table name for a topic (before the target's identifier case folding)."""
    mapping = topic2table or {}
    if not topic:
        raise ConfigException("topics", topic, "topic name is empty")
    if topic in mapping:
        return mapping[topic]
    if is_valid_identifier(topic):
        return topic
    for pattern, replacement in mapping.items():
        if pattern.startswith(REGEX_PREFIX):
            regex = pattern[len(REGEX_PREFIX):]
            candidate = re.sub(regex, _java_replacement(replacement), topic)
            if is_valid_identifier(candidate):
                return candidate
    chars = [topic[0] if _FIRST_OK.fullmatch(topic[0]) else "_"]
    if chars[0] == topic[0]:
        rest = topic[1:]
    else:
        rest = topic  # Snowflake prefixes `_` and keeps checking from the first character
    chars.extend(c if _REST_OK.fullmatch(c) else "_" for c in rest)
    return "".join(chars) + "_" + str(java_abs(java_string_hash(topic)))


def _java_replacement(text: str) -> str:
    """Java's `$1` group references in a replacement string -> Python's `\\1`."""
    return re.sub(r"\$(\d+)", r"\\\1", text.replace("\\", "\\\\"))
