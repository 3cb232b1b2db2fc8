"""The text formats of Kafka's console tools, set by the same `--property` names: how
kafka-console-consumer.sh prints a record (its DefaultMessageFormatter) and how
kafka-console-producer.sh turns an input line into a record (its LineMessageReader). Kept apart
from the commands so both directions follow one reading of Kafka's rules."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, Message

from ._common import UsageError, header_list

# Properties the consumer's formatter understands.
FORMATTER_PROPERTIES = frozenset({
    "print.timestamp", "print.key", "print.offset", "print.partition", "print.headers",
    "print.value", "key.separator", "line.separator", "headers.separator", "null.literal",
})
# Kafka's formatter names that name Java classes or other formatters' options: accepted, unused.
FORMATTER_IGNORED = ("print.epoch", "print.delivery", "key.deserializer", "value.deserializer",
                     "headers.deserializer", "header.deserializer")
# Properties the producer's line reader understands.
READER_PROPERTIES = frozenset({
    "parse.key", "key.separator", "parse.headers", "headers.delimiter", "headers.separator",
    "headers.key.separator", "ignore.error", "null.marker",
})


def split_properties(pairs: Iterable[tuple[str, str]], known: frozenset[str],
                     ignored: tuple[str, ...] = ()) -> tuple[dict[str, str], list[tuple[str, str]],
                                                              list[str]]:
    """--property pairs split into (the tool's own, client settings, ignored names). Names the
    tool does not know go to the client: earlier Samsa releases took client settings here."""
    tool: dict[str, str] = {}
    client: list[tuple[str, str]] = []
    skipped: list[str] = []
    for k, v in pairs:
        if k in known:
            tool[k] = v
        elif k in ignored or k.startswith(tuple(f"{i}." for i in ignored)):
            skipped.append(k)
        else:
            client.append((k, v))
    return tool, client, skipped


def is_true(value: str) -> bool:
    """Kafka's reading of a boolean tool property: 'true' in any case, anything else is false."""
    return value.strip().lower() == "true"


_TIMESTAMP_TYPES = {TIMESTAMP_CREATE_TIME: "CreateTime", TIMESTAMP_LOG_APPEND_TIME: "LogAppendTime"}


def _raw(b: str | bytes | None) -> bytes | None:
    return b.encode() if isinstance(b, str) else b


@dataclass(frozen=True)
class MessageFormat:
    """kafka-console-consumer.sh's default output: the enabled fields in a fixed order
    (timestamp, partition, offset, headers, key, value), key.separator between them,
    line.separator after the last."""

    print_timestamp: bool = False
    print_partition: bool = False
    print_offset: bool = False
    print_headers: bool = False
    print_key: bool = False
    print_value: bool = True
    key_separator: bytes = b"\t"
    line_separator: bytes = b"\n"
    headers_separator: bytes = b","
    null_literal: bytes = b"null"

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> MessageFormat:
        def flag(name: str, default: bool) -> bool:
            return is_true(props[name]) if name in props else default

        def text(name: str, default: bytes) -> bytes:
            return props[name].encode() if name in props else default

        return cls(
            print_timestamp=flag("print.timestamp", False),
            print_partition=flag("print.partition", False),
            print_offset=flag("print.offset", False),
            print_headers=flag("print.headers", False),
            print_key=flag("print.key", False),
            print_value=flag("print.value", True),
            key_separator=text("key.separator", b"\t"),
            line_separator=text("line.separator", b"\n"),
            headers_separator=text("headers.separator", b","),
            null_literal=text("null.literal", b"null"),
        )

    def _bytes(self, b: bytes | None) -> bytes:
        return self.null_literal if b is None else b

    def format(self, msg: Message) -> bytes:
        fields: list[bytes] = []
        if self.print_timestamp:
            ts_type, ts = msg.timestamp()
            name = _TIMESTAMP_TYPES.get(ts_type)
            fields.append(f"{name}:{ts}".encode() if name else b"NO_TIMESTAMP")
        if self.print_partition:
            fields.append(f"Partition:{msg.partition()}".encode())
        if self.print_offset:
            fields.append(f"Offset:{msg.offset()}".encode())
        if self.print_headers:
            hs = header_list(msg)
            fields.append(self.headers_separator.join(k.encode() + b":" + self._bytes(v)
                                                      for k, v in hs) if hs else b"NO_HEADERS")
        if self.print_key:
            fields.append(self._bytes(_raw(msg.key())))
        if self.print_value:
            fields.append(self._bytes(_raw(msg.value())))
        if not fields:
            return b""
        return self.key_separator.join(fields) + self.line_separator


class InputError(Exception):
    """An input line that cannot be turned into a record (Kafka's wording)."""


Header = tuple[str, bytes | None]


@dataclass(frozen=True)
class LineFormat:
    """kafka-console-producer.sh's line reader: [headers<headers.delimiter>][key<key.separator>]
    value, headers as k<headers.key.separator>v joined by headers.separator (a regular
    expression, as in Kafka); a key, value or header value equal to null.marker is null."""

    parse_key: bool = False
    key_separator: bytes = b"\t"
    parse_headers: bool = False
    headers_delimiter: bytes = b"\t"
    headers_separator: re.Pattern[bytes] = re.compile(b",")
    headers_key_separator: bytes = b":"
    ignore_error: bool = False
    null_marker: bytes | None = None

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> LineFormat:
        """The reader Kafka would configure from these properties; Kafka's checks on clashing
        separators become usage errors."""
        delimiter = props.get("headers.delimiter", "\t")
        separator = props.get("headers.separator", ",")
        key_sep = props.get("headers.key.separator", ":")
        kv_sep = props.get("key.separator", "\t")
        marker = props.get("null.marker")
        clashes = [("headers.delimiter", delimiter, "headers.separator", separator),
                   ("headers.delimiter", delimiter, "headers.key.separator", key_sep),
                   ("headers.separator", separator, "headers.key.separator", key_sep),
                   ("null.marker", marker, "key.separator", kv_sep),
                   ("null.marker", marker, "headers.separator", separator),
                   ("null.marker", marker, "headers.delimiter", delimiter),
                   ("null.marker", marker, "headers.key.separator", key_sep)]
        for a, va, b, vb in clashes:
            if va is not None and va == vb:
                raise UsageError(f"{a} and {b} may not be equal")
        for name, value in (("key.separator", kv_sep), ("headers.delimiter", delimiter),
                            ("headers.separator", separator),
                            ("headers.key.separator", key_sep)):
            if not value:
                raise UsageError(f"{name} may not be empty")
        try:
            pattern = re.compile(separator.encode())
        except re.error as e:
            raise UsageError(f"headers.separator {separator!r} is not a valid regular "
                             f"expression: {e}") from None
        return cls(
            parse_key=is_true(props.get("parse.key", "false")),
            key_separator=kv_sep.encode(),
            parse_headers=is_true(props.get("parse.headers", "false")),
            headers_delimiter=delimiter.encode(),
            headers_separator=pattern,
            headers_key_separator=key_sep.encode(),
            ignore_error=is_true(props.get("ignore.error", "false")),
            null_marker=marker.encode() if marker is not None else None,
        )

    def _null(self, b: bytes) -> bytes | None:
        return None if b == self.null_marker else b

    def _cut(self, enabled: bool, line: bytes, start: int, sep: bytes, what: str,
             lineno: int) -> bytes | None:
        """The text from `start` to the next `sep`; None if not parsed (or missing and ignored)."""
        if not enabled:
            return None
        i = line.find(sep, start)
        if i < 0:
            if self.ignore_error:
                return None
            raise InputError(f"No {what} found on line number {lineno}: '{_show(line)}'")
        return line[start:i]

    def _headers(self, text: bytes, lineno: int) -> list[Header]:
        pairs = self.headers_separator.split(text)
        if len(pairs) > 1:
            while pairs and pairs[-1] == b"":  # like Java's split: no trailing empty strings
                pairs.pop()
        out: list[Header] = []
        for pair in pairs:
            i = pair.find(self.headers_key_separator)
            if i < 0:
                if self.ignore_error:
                    out.append((_show(pair), None))
                    continue
                raise InputError(f"No header key separator found in pair '{_show(pair)}' on line "
                                 f"number {lineno}")
            key = pair[:i]
            if self.null_marker is not None and key == self.null_marker:
                raise InputError(f"Header keys should not be equal to the null marker "
                                 f"'{_show(self.null_marker)}' as they can't be null")
            out.append((_show(key), self._null(pair[i + len(self.headers_key_separator):])))
        return out

    def parse(self, line: bytes, lineno: int) -> tuple[bytes | None, bytes | None, list[Header]]:
        """(key, value, headers) of one input line (without its line ending)."""
        headers = self._cut(self.parse_headers, line, 0, self.headers_delimiter,
                            "headers delimiter", lineno)
        start = 0 if headers is None else len(headers) + len(self.headers_delimiter)
        key = self._cut(self.parse_key, line, start, self.key_separator, "key separator", lineno)
        if key is not None:
            start += len(key) + len(self.key_separator)
        parsed: list[Header] = []
        if headers is not None and headers != self.null_marker:
            parsed = self._headers(headers, lineno)
        return (None if key is None else self._null(key)), self._null(line[start:]), parsed


def _show(b: bytes) -> str:
    return b.decode("utf-8", errors="replace")

