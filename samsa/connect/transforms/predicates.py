"""Predicates (KIP-585) that decide whether a transform applies to a record."""

from __future__ import annotations

import re
from typing import Any

from ..api import Predicate
from ..config_def import NO_DEFAULT, ConfigDef, ConfigType, Importance, non_empty_string
from ..data import ConnectRecord
from ..errors import ConfigException
from ._util import java_regex, parse_config


def _pattern_validator(name: str, value: Any) -> None:
    non_empty_string(name, value)
    try:
        java_regex(value)
    except re.error as e:
        raise ConfigException(name, value, f"entry must be a valid regular expression: {e}") from None


class TopicNameMatches(Predicate):
    """True for records whose whole topic name matches `pattern` (a Java regular expression)."""

    def config(self) -> ConfigDef:
        return ConfigDef().define("pattern", ConfigType.STRING, NO_DEFAULT, _pattern_validator,
                                  Importance.MEDIUM,
                                  "A Java regular expression for matching against the name of a topic.")

    def configure(self, props: dict[str, Any]) -> None:
        self.pattern = java_regex(parse_config(self.config(), props)["pattern"])

    def test(self, record: ConnectRecord) -> bool:
        return record.topic is not None and self.pattern.fullmatch(record.topic) is not None

    def __str__(self) -> str:
        return f"TopicNameMatches{{pattern={self.pattern.pattern}}}"


class HasHeaderKey(Predicate):
    """True for records with at least one header named `name`."""

    def config(self) -> ConfigDef:
        return ConfigDef().define("name", ConfigType.STRING, NO_DEFAULT, non_empty_string,
                                  Importance.MEDIUM, "The header name.")

    def configure(self, props: dict[str, Any]) -> None:
        self.name: str = parse_config(self.config(), props)["name"]

    def test(self, record: ConnectRecord) -> bool:
        return record.headers.last_with_name(self.name) is not None

    def __str__(self) -> str:
        return f"HasHeaderKey{{name='{self.name}'}}"


class RecordIsTombstone(Predicate):
    """True for tombstones: records whose value is null."""

    def config(self) -> ConfigDef:
        return ConfigDef()

    def configure(self, props: dict[str, Any]) -> None:
        pass

    def test(self, record: ConnectRecord) -> bool:
        return record.value is None

    def __str__(self) -> str:
        return "RecordIsTombstone{}"
