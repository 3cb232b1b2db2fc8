"""A connector's transformation chain, built from its `transforms` / `predicates` settings the way
Kafka's ConnectorConfig does, and the per-alias config keys `/config/validate` reports.

    transforms=route,drop
    transforms.route.type=org.apache.kafka.connect.transforms.RegexRouter
    transforms.route.regex=(.*)   transforms.route.replacement=copy-$1
    transforms.drop.type=org.apache.kafka.connect.transforms.Filter
    transforms.drop.predicate=tomb   transforms.drop.negate=false
    predicates=tomb
    predicates.tomb.type=org.apache.kafka.connect.transforms.predicates.RecordIsTombstone

Each plugin is configured with the connector's properties under its prefix, prefix stripped."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..api import Predicate, Transformation
from ..config_def import (
    NO_DEFAULT,
    ConfigDef,
    ConfigKey,
    ConfigType,
    Importance,
    Validator,
    Width,
    parse_value,
)
from ..data import ConnectRecord
from ..errors import ConfigException, NotFoundException
from ..plugins import Plugins, PluginType

TRANSFORMS = "transforms"
PREDICATES = "predicates"
PREDICATE = "predicate"
NEGATE = "negate"
TRANSFORMS_GROUP = "Transforms"
PREDICATES_GROUP = "Predicates"
COMMON_GROUP = "Common"


Runner = Callable[[Callable[[], "ConnectRecord | None"], str], "ConnectRecord | None"]


@dataclass
class TransformationStage:
    """One transform, applied only when its predicate (if any) says so (Kafka's
    PredicatedTransformation: apply iff `negate XOR predicate.test(record)`)."""

    alias: str
    transformation: Transformation
    predicate: Predicate | None = None
    negate: bool = False
    predicate_alias: str | None = None
    class_name: str = ""  # the plugin's canonical (Kafka) class name, for error reports

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        if self.predicate is not None and self.negate == self.predicate.test(record):
            return record
        return self.transformation.apply(record)

    def close(self) -> None:
        try:
            self.transformation.close()
        finally:
            if self.predicate is not None:
                self.predicate.close()


class TransformationChain:
    """The transforms of one connector, in `transforms` order; `apply` returns None as soon as a
    transform drops the record."""

    def __init__(self, stages: list[TransformationStage] | None = None) -> None:
        self.stages = list(stages or [])

    @classmethod
    def from_config(cls, connector_props: dict[str, str], plugins: Plugins) -> TransformationChain:
        """Parse and check the transform and predicate settings (ConfigException with Kafka's
        wording on the first problem), then create and configure every stage."""
        props = dict(connector_props)
        definition = _alias_keys(ConfigDef())
        definition = _enrich(definition, props, plugins, require_full=True)
        definition.parse(props)  # missing / invalid per-alias settings fail here, as in Kafka
        predicate_aliases = _aliases(props, PREDICATES)
        stages: list[TransformationStage] = []
        try:
            for alias in _aliases(props, TRANSFORMS):
                prefix = f"{TRANSFORMS}.{alias}."
                own = _with_prefix(props, prefix)
                predicate_alias = own.pop(PREDICATE, None) or None
                negate = parse_value(prefix + NEGATE, ConfigType.BOOLEAN, own.pop(NEGATE, "false"))
                desc = plugins.find(props[prefix + "type"], PluginType.TRANSFORMATION)
                transformation = desc.load()()
                stage = TransformationStage(alias, transformation, class_name=desc.name)
                stages.append(stage)
                transformation.configure(own)
                if predicate_alias is not None:
                    if predicate_alias not in predicate_aliases:
                        raise ConfigException(prefix + PREDICATE, predicate_alias,
                                              f"Predicate alias {predicate_alias} is not defined in "
                                              f"'{PREDICATES}'")
                    pprefix = f"{PREDICATES}.{predicate_alias}."
                    predicate = plugins.new(props[pprefix + "type"], PluginType.PREDICATE)
                    stage.predicate, stage.negate, stage.predicate_alias = predicate, bool(negate), \
                        predicate_alias
                    predicate.configure(_with_prefix(props, pprefix))
        except Exception:
            for stage in stages:
                _close_quietly(stage)
            raise
        return cls(stages)

    def apply(self, record: ConnectRecord, runner: Runner | None = None) -> ConnectRecord | None:
        """The record after every stage (None once one drops it). `runner(call, class_name)`,
        when given, runs each stage's call, so error handling (retries, tolerance, the DLQ's
        `__connect.errors.class.name`) sees which transform failed, as Kafka's chain does."""
        current: ConnectRecord | None = record
        for stage in self.stages:
            assert current is not None
            if runner is None:
                current = stage.apply(current)
            else:
                current = runner(functools.partial(stage.apply, current), stage.class_name)
            if current is None:
                return None
        return current

    def close(self) -> None:
        for stage in self.stages:
            _close_quietly(stage)

    def __len__(self) -> int:
        return len(self.stages)


def _close_quietly(stage: TransformationStage) -> None:
    try:
        stage.close()
    except Exception:  # closing one plugin must not keep the others open
        pass


def _with_prefix(props: dict[str, Any], prefix: str) -> dict[str, Any]:
    return {k[len(prefix):]: v for k, v in props.items() if k.startswith(prefix)}


def _aliases(props: dict[str, Any], key: str) -> list[str]:
    """The unique aliases of `transforms` / `predicates`, in order (duplicates fail validation)."""
    try:
        raw = parse_value(key, ConfigType.LIST, props.get(key))
    except ConfigException:
        return []
    out: list[str] = []
    for alias in raw or []:
        if alias and alias not in out:
            out.append(alias)
    return out


def _unique_aliases(kind: str) -> Validator:
    def check(name: str, value: Any) -> None:
        if value is None:
            raise ConfigException(name, None, "Value must be non-null")
        if len(value) != len(set(value)):
            raise ConfigException(name, ",".join(value), "Duplicate alias provided.")
    check.__doc__ = f"unique {kind} aliases"
    return check


def _alias_keys(definition: ConfigDef) -> ConfigDef:
    """`transforms` and `predicates` themselves, when the connector's definition lacks them; a
    definition that has them without a validator gets Kafka's unique-alias check (on a copy of
    the key: the base definition is not changed)."""
    for name, kind in ((TRANSFORMS, "transformation"), (PREDICATES, "predicate")):
        key = definition.keys.get(name)
        if key is not None and key.validator is None:
            definition.keys[name] = dataclasses.replace(key, validator=_unique_aliases(kind))
    if TRANSFORMS not in definition.keys:
        definition.define(TRANSFORMS, ConfigType.LIST, "", _unique_aliases("transformation"),
                          Importance.LOW, "Aliases for the transformations to be applied to records.",
                          group=COMMON_GROUP, order_in_group=6, width=Width.LONG,
                          display_name="Transforms")
    if PREDICATES not in definition.keys:
        definition.define(PREDICATES, ConfigType.LIST, "", _unique_aliases("predicate"),
                          Importance.LOW, "Aliases for the predicates used by transformations.",
                          group=COMMON_GROUP, order_in_group=7, width=Width.LONG,
                          display_name="Predicates")
    return definition


def enrich_config_def(base: ConfigDef, props: dict[str, str], plugins: Plugins) -> ConfigDef:
    """`base` plus, for every alias in `transforms` / `predicates`, its `type` key and the keys of
    the plugin it names (prefixed, in group "Transforms: <alias>" / "Predicates: <alias>"), so
    validation reports each transform's settings. Never raises for a bad plugin: the `type` key's
    validator reports it."""
    definition = _alias_keys(ConfigDef(base.keys.values()))
    return _enrich(definition, dict(props), plugins, require_full=False)


# ---- enrichment (Kafka's ConnectorConfig.enrich / EnrichablePlugin) ---------------------------
@dataclass(frozen=True)
class _Kind:
    config: str  # "transforms" / "predicates"
    group: str
    name: str  # "Transformation" / "Predicate"
    plugin_type: PluginType


_TRANSFORM_KIND = _Kind(TRANSFORMS, TRANSFORMS_GROUP, "Transformation", PluginType.TRANSFORMATION)
_PREDICATE_KIND = _Kind(PREDICATES, PREDICATES_GROUP, "Predicate", PluginType.PREDICATE)


def _enrich(definition: ConfigDef, props: dict[str, Any], plugins: Plugins, *,
            require_full: bool) -> ConfigDef:
    for kind in (_TRANSFORM_KIND, _PREDICATE_KIND):
        for alias in _aliases(props, kind.config):
            _enrich_alias(definition, kind, alias, props, plugins, require_full)
    return definition


def _plugin_config(kind: _Kind, key: str, value: Any, plugins: Plugins) -> ConfigDef:
    """The ConfigDef of the plugin a `type` setting names; ConfigException as Kafka words it."""
    name = str(value).strip() if value is not None else ""
    try:
        desc = plugins.find(name)
    except NotFoundException:
        hint = _did_you_mean(name, plugins, kind)
        if hint:
            raise ConfigException(key, name, f"{kind.name} is abstract and cannot be created. "
                                             f"Did you mean {hint}?") from None
        raise ConfigException(key, name, f"Class {name} could not be found.") from None
    if desc.kind is not kind.plugin_type:
        raise ConfigException(key, name, f"Not a {kind.name}")
    try:
        instance = desc.load()()
        config = instance.config()
    except Exception as e:
        raise ConfigException(key, name, f"Error getting config definition from {kind.name}: {e}") from None
    if not isinstance(config, ConfigDef):
        raise ConfigException(key, name, f"{desc.name}.config() must return a ConfigDef that is not null.")
    return config


def _did_you_mean(name: str, plugins: Plugins, kind: _Kind) -> str:
    """`...InsertField` names Kafka's abstract class: suggest its $Key / $Value variants."""
    found = []
    for side in ("$Key", "$Value"):
        try:
            desc = plugins.find(name + side, kind.plugin_type)
        except NotFoundException:
            continue
        found.append(desc.name)
    return ", ".join(found)


def _enrich_alias(definition: ConfigDef, kind: _Kind, alias: str, props: dict[str, Any],
                  plugins: Plugins, require_full: bool) -> None:
    prefix = f"{kind.config}.{alias}."
    group = f"{kind.group}: {alias}"
    type_key = prefix + "type"

    def type_validator(name: str, value: Any) -> None:
        if kind is _TRANSFORM_KIND and prefix + NEGATE in props and prefix + PREDICATE not in props:
            raise ConfigException(f"Config '{prefix}{NEGATE}' was provided but there is no config "
                                  f"'{prefix}{PREDICATE}' defining a predicate to be negated.")
        _plugin_config(kind, name, value, plugins)
    type_validator.__doc__ = f"valid configs for {alias} {kind.name.lower()}"

    def recommend(_parsed: dict[str, Any]) -> list[Any]:
        return [d.name for d in plugins.listing((kind.plugin_type,))]

    if type_key in definition.keys:
        return
    definition.define(type_key, ConfigType.CLASS, NO_DEFAULT, type_validator, Importance.HIGH,
                      f"Class for the '{alias}' {kind.name.lower()}.", group=group, order_in_group=0,
                      width=Width.LONG, display_name=f"{kind.name} type for {alias}",
                      recommended=recommend)

    child = ConfigDef()
    if kind is _TRANSFORM_KIND:
        def predicate_defined(name: str, value: Any) -> None:
            if value and value not in _aliases(props, PREDICATES):
                raise ConfigException(prefix + PREDICATE, value, f"Predicate alias {value} is not "
                                                                  f"defined in '{PREDICATES}'")
        child.define(PREDICATE, ConfigType.STRING, "", predicate_defined, Importance.MEDIUM,
                     "The alias of a predicate used to determine whether to apply this transformation.")
        child.define(NEGATE, ConfigType.BOOLEAN, False, None, Importance.MEDIUM,
                     "Whether the configured predicate should be negated.")
    try:
        if type_key not in props:
            raise ConfigException(type_key, None,
                                  f'Missing required configuration "{type_key}" which has no default value.')
        plugin_def = _plugin_config(kind, type_key, props[type_key], plugins)
    except ConfigException:
        if require_full:
            raise
        plugin_def = None
    if plugin_def is not None:
        for key in plugin_def.keys.values():
            if kind is _TRANSFORM_KIND and key.name in (PREDICATE, NEGATE):
                continue  # the implicit settings mask a transform's own of that name
            child.keys[key.name] = key
    _embed(definition, prefix, group, 1, child)


def _embedded(prefix: str, validator: Validator | None) -> Validator | None:
    """A plugin's validator under a prefix: it still sees (and names) its own key, as Kafka's
    ConfigDef.embed does."""
    if validator is None:
        return None
    inner = validator

    def check(name: str, value: Any) -> None:
        inner(name[len(prefix):] if name.startswith(prefix) else name, value)
    check.__doc__ = inner.__doc__
    return check


def _embedded_recommender(prefix: str, recommender: Callable[[dict[str, Any]], list[Any]] | None
                          ) -> Callable[[dict[str, Any]], list[Any]] | None:
    if recommender is None:
        return None
    inner = recommender

    def recommend(parsed: dict[str, Any]) -> list[Any]:
        return inner(_with_prefix(parsed, prefix))
    return recommend


def _embed(definition: ConfigDef, prefix: str, group: str, start_order: int, child: ConfigDef) -> None:
    for i, key in enumerate(child.keys.values()):
        name = prefix + key.name
        if name in definition.keys:
            continue
        definition.keys[name] = ConfigKey(
            name, key.type, key.default, _embedded(prefix, key.validator), key.importance,
            key.documentation, group, start_order + i, key.width, key.display_name or key.name,
            [prefix + d for d in key.dependents], _embedded_recommender(prefix, key.recommended),
            key.internal)
