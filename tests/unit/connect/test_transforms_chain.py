"""TransformationChain.from_config (Kafka's transforms / predicates settings, negate, errors) and
enrich_config_def (the per-alias keys and groups /config/validate reports)."""

from __future__ import annotations

import pytest

from samsa.connect.config_def import ConfigDef, ConfigType, Importance
from samsa.connect.data import Header, Headers, SourceRecord
from samsa.connect.errors import ConfigException
from samsa.connect.plugins import Plugins, PluginType
from samsa.connect.transforms import PLUGINS
from samsa.connect.transforms.chain import TransformationChain, enrich_config_def

T = "org.apache.kafka.connect.transforms."


@pytest.fixture(scope="module")
def plugins() -> Plugins:
    return Plugins()


def rec(value="v", topic="orders", headers=None):
    return SourceRecord(topic, 0, None, None, None, value, 1, Headers(headers or []))


def test_plugins_table_lists_every_transform(plugins):
    names = {d.name for d in plugins.listing((PluginType.TRANSFORMATION,))}
    for base in ("InsertField", "ReplaceField", "MaskField", "ExtractField", "HoistField", "Cast",
                 "Flatten", "TimestampConverter", "SetSchemaMetadata", "HeaderFrom"):
        assert {f"{T}{base}$Key", f"{T}{base}$Value"} <= names
    for plain in ("ValueToKey", "TimestampRouter", "RegexRouter", "Filter", "InsertHeader", "DropHeaders"):
        assert T + plain in names
    preds = {d.name for d in plugins.listing((PluginType.PREDICATE,))}
    assert preds == {f"{T}predicates.{p}" for p in ("TopicNameMatches", "HasHeaderKey", "RecordIsTombstone")}
    assert len(PLUGINS) == len(names) + len(preds)
    assert plugins.find("RegexRouter").name == T + "RegexRouter"


def test_chain_applies_in_order_and_strips_prefixes(plugins):
    props = {
        "name": "c", "transforms": "route, hdr",
        "transforms.route.type": T + "RegexRouter",
        "transforms.route.regex": "(.*)", "transforms.route.replacement": "copy-$1",
        "transforms.hdr.type": "InsertHeader",  # simple names work as in Kafka's aliases
        "transforms.hdr.header": "h", "transforms.hdr.value.literal": "1",
    }
    chain = TransformationChain.from_config(props, plugins)
    assert [s.alias for s in chain.stages] == ["route", "hdr"]
    out = chain.apply(rec())
    assert out.topic == "copy-orders" and out.headers.last_with_name("h").value == 1
    chain.close()


def test_empty_chain_is_identity(plugins):
    chain = TransformationChain.from_config({"name": "c"}, plugins)
    r = rec()
    assert len(chain) == 0 and chain.apply(r) is r


@pytest.mark.parametrize("negate,expected_topics", [
    ("false", ["orders"]),  # drop tombstones
    ("true", ["tomb"]),  # drop everything but tombstones
])
def test_filter_with_predicate_and_negate(plugins, negate, expected_topics):
    props = {"transforms": "drop", "transforms.drop.type": T + "Filter",
             "transforms.drop.predicate": "isTomb", "transforms.drop.negate": negate,
             "predicates": "isTomb", "predicates.isTomb.type": T + "predicates.RecordIsTombstone"}
    chain = TransformationChain.from_config(props, plugins)
    kept = [r.topic for r in (rec("v", "orders"), rec(None, "tomb")) if chain.apply(r) is not None]
    assert kept == expected_topics


def test_predicate_configured_with_its_own_props(plugins):
    props = {"transforms": "route", "transforms.route.type": T + "RegexRouter",
             "transforms.route.regex": "(.*)", "transforms.route.replacement": "x-$1",
             "transforms.route.predicate": "onlyFoo",
             "predicates": "onlyFoo,hasH",
             "predicates.onlyFoo.type": T + "predicates.TopicNameMatches",
             "predicates.onlyFoo.pattern": "foo.*",
             "predicates.hasH.type": T + "predicates.HasHeaderKey", "predicates.hasH.name": "h"}
    chain = TransformationChain.from_config(props, plugins)
    assert chain.apply(rec(topic="foo1")).topic == "x-foo1"
    assert chain.apply(rec(topic="bar")).topic == "bar"
    assert chain.stages[0].predicate_alias == "onlyFoo"


@pytest.mark.parametrize("props,message", [
    ({"transforms": "a,a", "transforms.a.type": T + "Filter"}, "Duplicate alias provided."),
    ({"transforms": "a"}, 'Missing required configuration "transforms.a.type" which has no default value.'),
    ({"transforms": "a", "transforms.a.type": "com.example.Nope"},
     "Class com.example.Nope could not be found."),
    ({"transforms": "a", "transforms.a.type": T + "predicates.RecordIsTombstone"}, "Not a Transformation"),
    ({"transforms": "a", "transforms.a.type": T + "InsertField"},
     "Transformation is abstract and cannot be created. Did you mean " + T + "InsertField$Key, "
     + T + "InsertField$Value?"),
    ({"transforms": "a", "transforms.a.type": T + "RegexRouter", "transforms.a.replacement": "x"},
     'Missing required configuration "transforms.a.regex" which has no default value.'),
    ({"transforms": "a", "transforms.a.type": T + "Filter", "transforms.a.negate": "true"},
     "Config 'transforms.a.negate' was provided but there is no config 'transforms.a.predicate' "
     "defining a predicate to be negated."),
    ({"transforms": "a", "transforms.a.type": T + "Filter", "transforms.a.predicate": "p"},
     "Predicate alias p is not defined in 'predicates'"),
    ({"transforms": "a", "transforms.a.type": T + "Filter", "transforms.a.predicate": "p",
      "predicates": "p"}, 'Missing required configuration "predicates.p.type"'),
    ({"predicates": "p", "predicates.p.type": T + "Filter"}, "Not a Predicate"),
    ({"predicates": "p", "predicates.p.type": T + "predicates.TopicNameMatches"},
     'Missing required configuration "predicates.p.pattern"'),
    ({"transforms": "a", "transforms.a.type": T + "HeaderFrom$Value", "transforms.a.fields": "x",
      "transforms.a.headers": "x,y", "transforms.a.operation": "copy"}, "same number of elements"),
])
def test_chain_config_errors(plugins, props, message):
    with pytest.raises(ConfigException) as e:
        TransformationChain.from_config(props, plugins)
    assert message in str(e.value)


def test_enrich_config_def_groups_and_errors(plugins):
    base = ConfigDef().define("name", ConfigType.STRING, importance=Importance.HIGH)
    props = {"name": "c", "transforms": "route,bad,missing",
             "transforms.route.type": T + "RegexRouter", "transforms.route.regex": "(",
             "transforms.bad.type": "com.example.Nope",
             "predicates": "p", "predicates.p.type": T + "predicates.HasHeaderKey"}
    d = enrich_config_def(base, props, plugins)
    assert "name" in d.keys and "transforms" in d.keys and "predicates" in d.keys
    assert "transforms.route.regex" not in base.keys  # base is not changed
    route = [k for k in d.keys.values() if k.group == "Transforms: route"]
    assert [k.name for k in route] == ["transforms.route.type", "transforms.route.predicate",
                                       "transforms.route.negate", "transforms.route.regex",
                                       "transforms.route.replacement"]
    assert [k.order_in_group for k in route] == [0, 1, 2, 3, 4]
    type_key = d.keys["transforms.route.type"]
    assert type_key.type is ConfigType.CLASS and type_key.display_name == "Transformation type for route"
    assert type_key.definition()["required"] is True
    assert [k.name for k in d.keys.values() if k.group == "Predicates: p"] == \
        ["predicates.p.type", "predicates.p.name"]
    assert [k.name for k in d.keys.values() if k.group == "Transforms: bad"] == \
        ["transforms.bad.type", "transforms.bad.predicate", "transforms.bad.negate"]

    result = d.validate(props)
    assert result["transforms.route.type"].errors == []
    assert any("regex" in e for e in result["transforms.route.regex"].errors)
    assert any("could not be found" in e for e in result["transforms.bad.type"].errors)
    assert any("Missing required configuration" in e for e in result["transforms.route.replacement"].errors)
    assert any("Missing required configuration" in e for e in result["transforms.missing.type"].errors)
    assert any("Missing required configuration" in e for e in result["predicates.p.name"].errors)
    assert T + "RegexRouter" in result["transforms.route.type"].recommended_values


@pytest.mark.parametrize("with_base_key", [False, True])
def test_enrich_reports_duplicate_aliases(plugins, with_base_key):
    base = ConfigDef()
    if with_base_key:  # the runtime's connector definition has the key, without a validator
        base.define("transforms", ConfigType.LIST, "", None, Importance.LOW, "aliases")
    props = {"transforms": "a,a", "transforms.a.type": T + "Filter"}
    d = enrich_config_def(base, props, plugins)
    assert d.validate(props)["transforms"].errors == [
        "Invalid value a,a for configuration transforms: Duplicate alias provided."]
    if with_base_key:
        assert base.keys["transforms"].validator is None


def test_close_closes_every_stage(plugins, monkeypatch):
    from samsa.connect.transforms.routing import RegexRouter
    closed: list[str] = []
    monkeypatch.setattr(RegexRouter, "close", lambda self: closed.append("router"))
    chain = TransformationChain.from_config(
        {"transforms": "a", "transforms.a.type": T + "RegexRouter", "transforms.a.regex": "x",
         "transforms.a.replacement": "y", "transforms.a.predicate": "p", "predicates": "p",
         "predicates.p.type": T + "predicates.RecordIsTombstone"}, plugins)
    chain.close()
    assert closed == ["router"]


def test_header_predicate_in_chain(plugins):
    props = {"transforms": "drop", "transforms.drop.type": T + "DropHeaders",
             "transforms.drop.headers": "secret", "transforms.drop.predicate": "has",
             "transforms.drop.negate": "false",
             "predicates": "has", "predicates.has.type": "HasHeaderKey", "predicates.has.name": "flag"}
    chain = TransformationChain.from_config(props, plugins)
    flagged = chain.apply(rec(headers=[Header("flag", None, 1), Header("secret", None, 2)]))
    plain = chain.apply(rec(headers=[Header("secret", None, 2)]))
    assert [h.key for h in flagged.headers] == ["flag"]
    assert [h.key for h in plain.headers] == ["secret"]


def test_runner_sees_each_stage_and_its_class(plugins):
    props = {"transforms": "route,drop", "transforms.route.type": "RegexRouter",
             "transforms.route.regex": "(.*)", "transforms.route.replacement": "r-$1",
             "transforms.drop.type": T + "Filter"}
    chain = TransformationChain.from_config(props, plugins)
    seen: list[str] = []

    def runner(call, class_name):
        seen.append(class_name)
        return call()
    assert chain.apply(rec(), runner) is None
    assert seen == [T + "RegexRouter", T + "Filter"]
