"""Config definitions (Kafka's ConfigDef): typed keys with defaults, validators, importance and
documentation. Connectors, transforms, converters and the worker describe their settings with
one; parsing turns string properties into typed values, and `validate` gives the per-key answer
that `PUT /connector-plugins/{plugin}/config/validate` returns."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from .errors import ConfigException


class ConfigType(StrEnum):
    BOOLEAN = "BOOLEAN"
    STRING = "STRING"
    INT = "INT"
    SHORT = "SHORT"
    LONG = "LONG"
    DOUBLE = "DOUBLE"
    LIST = "LIST"
    CLASS = "CLASS"
    PASSWORD = "PASSWORD"


class Importance(StrEnum):
    HIGH = "HIGH"
    MEDIUM = "MEDIUM"
    LOW = "LOW"


class Width(StrEnum):
    NONE = "NONE"
    SHORT = "SHORT"
    MEDIUM = "MEDIUM"
    LONG = "LONG"


class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT: Any = _NoDefault()
_INT_BOUNDS = {ConfigType.SHORT: 16, ConfigType.INT: 32, ConfigType.LONG: 64}


class Password(str):
    """A secret: its str() is the value (for the code that needs it); repr hides it."""

    def __repr__(self) -> str:
        return "[hidden]"


def parse_value(name: str, ctype: ConfigType, value: Any) -> Any:
    """A string (or already typed) property as its typed value, or ConfigException."""
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        try:
            if ctype is ConfigType.BOOLEAN:
                if text.lower() in ("true", "false"):
                    return text.lower() == "true"
                raise ConfigException(name, value, "Expected value to be either true or false")
            if ctype in _INT_BOUNDS:
                n = int(text)
                bits = _INT_BOUNDS[ctype]
                if not -(1 << (bits - 1)) <= n < (1 << (bits - 1)):
                    raise ConfigException(name, value, f"Not a number of type {ctype.value}")
                return n
            if ctype is ConfigType.DOUBLE:
                return float(text)
            if ctype is ConfigType.LIST:
                return [item.strip() for item in text.split(",")] if text else []
            if ctype is ConfigType.PASSWORD:
                return Password(value)
            if ctype is ConfigType.CLASS:
                return text
            return value if ctype is ConfigType.STRING else text
        except ValueError:
            raise ConfigException(name, value, f"Not a number of type {ctype.value}") from None
    if ctype is ConfigType.BOOLEAN and isinstance(value, bool):
        return value
    if ctype in _INT_BOUNDS and isinstance(value, int) and not isinstance(value, bool):
        return value
    if ctype is ConfigType.DOUBLE and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if ctype is ConfigType.LIST and isinstance(value, list | tuple):
        return [str(v) for v in value]
    if ctype is ConfigType.CLASS and isinstance(value, type):
        return f"{value.__module__}.{value.__qualname__}"
    raise ConfigException(name, value, f"Expected a {ctype.value}")


def format_value(ctype: ConfigType, value: Any) -> str | None:
    """A typed value back as the string Connect shows (lists comma-joined, passwords hidden)."""
    if value is None or value is NO_DEFAULT:
        return None
    if ctype is ConfigType.PASSWORD:
        return "[hidden]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


# ---- validators -------------------------------------------------------------------------------
Validator = Callable[[str, Any], None]


def at_least(minimum: float) -> Validator:
    def check(name: str, value: Any) -> None:
        if value is None or value < minimum:
            raise ConfigException(name, value, f"Value must be at least {minimum:g}")
    check.__doc__ = f"[{minimum:g},...]"
    return check


def between(low: float, high: float) -> Validator:
    def check(name: str, value: Any) -> None:
        if value is None or not low <= value <= high:
            raise ConfigException(name, value, f"Value must be no less than {low:g} and no more "
                                               f"than {high:g}")
    check.__doc__ = f"[{low:g},...,{high:g}]"
    return check


def one_of(*allowed: str, case_insensitive: bool = False) -> Validator:
    options = [a.lower() for a in allowed] if case_insensitive else list(allowed)

    def check(name: str, value: Any) -> None:
        v = value.lower() if case_insensitive and isinstance(value, str) else value
        if v not in options:
            raise ConfigException(name, value, f"String must be one of: {', '.join(allowed)}")
    check.__doc__ = "[" + ", ".join(allowed) + "]"
    return check


def list_of(*allowed: str) -> Validator:
    def check(name: str, value: Any) -> None:
        for item in value or []:
            if item not in allowed:
                raise ConfigException(name, item, f"Invalid value {item} for configuration "
                                                  f"{name}: must be one of {', '.join(allowed)}")
    check.__doc__ = "[" + ", ".join(allowed) + "]"
    return check


def non_empty_string(name: str, value: Any) -> None:
    if value is None or (isinstance(value, str) and not value.strip()):
        raise ConfigException(name, value, "String may not be empty")


def non_null(name: str, value: Any) -> None:
    if value is None:
        raise ConfigException(name, None, "Value must be non-null")


def regex(pattern: str) -> Validator:
    def check(name: str, value: Any) -> None:
        try:
            re.compile(value)
        except (re.error, TypeError) as e:
            raise ConfigException(name, value, f"not a valid regular expression: {e}") from None
    del pattern
    return check


def all_of(*validators: Validator) -> Validator:
    def check(name: str, value: Any) -> None:
        for v in validators:
            v(name, value)
    return check


# ---- keys, values, the definition -----------------------------------------------------------
@dataclass
class ConfigKey:
    name: str
    type: ConfigType
    default: Any
    validator: Validator | None
    importance: Importance
    documentation: str
    group: str | None = None
    order_in_group: int = -1
    width: Width = Width.NONE
    display_name: str | None = None
    dependents: list[str] = field(default_factory=list)
    recommended: Callable[[dict[str, Any]], list[Any]] | None = None
    internal: bool = False

    @property
    def required(self) -> bool:
        return self.default is NO_DEFAULT

    def definition(self) -> dict[str, Any]:
        """Connect's ConfigKeyInfo JSON."""
        return {"name": self.name, "type": self.type.value, "required": self.required,
                "default_value": format_value(self.type, self.default) if not self.required else None,
                "importance": self.importance.value, "documentation": self.documentation,
                "group": self.group, "width": self.width.value,
                "display_name": self.display_name or self.name, "dependents": list(self.dependents),
                "order": self.order_in_group}


@dataclass
class ConfigValue:
    """One key's validation result (Connect's ConfigValueInfo)."""

    name: str
    value: Any = None
    recommended_values: list[Any] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    visible: bool = True

    def info(self, ctype: ConfigType | None = None) -> dict[str, Any]:
        shown = format_value(ctype, self.value) if ctype is not None else \
            (None if self.value is None else str(self.value))
        return {"name": self.name, "value": shown,
                "recommended_values": [str(v) for v in self.recommended_values],
                "errors": list(self.errors), "visible": self.visible}


class ConfigDef:
    """An ordered set of config keys; `define` returns self so definitions chain."""

    def __init__(self, keys: Iterable[ConfigKey] = ()) -> None:
        self.keys: dict[str, ConfigKey] = {}
        for k in keys:
            self.keys[k.name] = k

    def define(self, name: str, type: ConfigType, default: Any = NO_DEFAULT,
               validator: Validator | None = None, importance: Importance = Importance.MEDIUM,
               documentation: str = "", *, group: str | None = None, order_in_group: int = -1,
               width: Width = Width.NONE, display_name: str | None = None,
               dependents: list[str] | None = None,
               recommended: Callable[[dict[str, Any]], list[Any]] | None = None,
               internal: bool = False) -> ConfigDef:
        if name in self.keys:
            raise ConfigException(name, None, f"Configuration {name} is defined twice.")
        if default is not NO_DEFAULT and default is not None:
            default = parse_value(name, type, default)
            if validator is not None:
                validator(name, default)
        self.keys[name] = ConfigKey(name, type, default, validator, importance, documentation,
                                    group, order_in_group, width, display_name,
                                    list(dependents or []), recommended, internal)
        return self

    def merge(self, other: ConfigDef) -> ConfigDef:
        """A new definition with this one's keys and then `other`'s (other wins on a clash)."""
        return ConfigDef([*self.keys.values(), *other.keys.values()])

    def names(self) -> list[str]:
        return list(self.keys)

    def groups(self) -> list[str]:
        out: list[str] = []
        for k in self.keys.values():
            if k.group and k.group not in out:
                out.append(k.group)
        return out

    def parse(self, props: dict[str, Any]) -> dict[str, Any]:
        """Typed values for every defined key (defaults filled in); ConfigException on the first
        missing required key or invalid value. Unknown keys are ignored, as in Kafka."""
        out: dict[str, Any] = {}
        for key in self.keys.values():
            if key.name in props:
                value = parse_value(key.name, key.type, props[key.name])
            elif key.required:
                raise ConfigException(key.name, None,
                                      f'Missing required configuration "{key.name}" which has '
                                      f"no default value.")
            else:
                value = key.default
            if key.validator is not None and (value is not None or key.name in props):
                key.validator(key.name, value)
            out[key.name] = value
        return out

    def validate(self, props: dict[str, Any]) -> dict[str, ConfigValue]:
        """Every key's ConfigValue with all its errors (never raises): what validate answers."""
        parsed: dict[str, Any] = {}
        values: dict[str, ConfigValue] = {}
        for key in self.keys.values():
            cv = ConfigValue(key.name)
            values[key.name] = cv
            if key.name in props:
                try:
                    cv.value = parse_value(key.name, key.type, props[key.name])
                except ConfigException as e:
                    cv.value = props[key.name]
                    cv.errors.append(str(e))
                    continue
            elif key.required:
                cv.errors.append(f'Missing required configuration "{key.name}" which has no '
                                 f"default value.")
                continue
            else:
                cv.value = key.default
            parsed[key.name] = cv.value
            if key.validator is not None and (cv.value is not None or key.name in props):
                try:
                    key.validator(key.name, cv.value)
                except ConfigException as e:
                    cv.errors.append(str(e))
        for key in self.keys.values():
            if key.recommended is not None:
                try:
                    values[key.name].recommended_values = list(key.recommended(parsed))
                except Exception:  # a recommender's bug must not fail validation
                    values[key.name].recommended_values = []
        return values


class AbstractConfig:
    """Parsed, typed access to a component's settings (Kafka's AbstractConfig)."""

    def __init__(self, definition: ConfigDef, props: dict[str, Any]) -> None:
        self.definition = definition
        self.originals = dict(props)
        self.values = definition.parse(props)

    def get(self, name: str) -> Any:
        if name not in self.values:
            raise ConfigException(name, None, f"Unknown configuration '{name}'")
        return self.values[name]

    def originals_with_prefix(self, prefix: str, strip: bool = True) -> dict[str, Any]:
        return {(k[len(prefix):] if strip else k): v for k, v in self.originals.items()
                if k.startswith(prefix)}
