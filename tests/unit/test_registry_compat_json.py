"""JSON Schema evolutions per compatibility level: open vs closed content models, required
properties, types and constraints."""

from __future__ import annotations

import json
from typing import Any

import pytest

from samsa.registry.compat import check
from samsa.registry.formats import Dependency, InvalidSchema, parse

pytestmark = pytest.mark.timeout(60)


def obj(props: dict[str, Any], required: list[str] | None = None, closed: bool = False,
        **extra: Any) -> str:
    s: dict[str, Any] = {"type": "object", "properties": props, **extra}
    if required:
        s["required"] = required
    if closed:
        s["additionalProperties"] = False
    return json.dumps(s)


STR = {"type": "string"}
INT = {"type": "integer"}
NUM = {"type": "number"}

CASES = [
    ("add property to closed model", obj({"a": STR}, closed=True), obj({"a": STR, "b": INT}, closed=True),
     {"BACKWARD": True, "FORWARD": False, "FULL": False}),
    ("add property to open model", obj({"a": STR}), obj({"a": STR, "b": INT}),
     {"BACKWARD": False, "FORWARD": True, "NONE": True}),
    ("remove property from open model", obj({"a": STR, "b": INT}), obj({"a": STR}),
     {"BACKWARD": True, "FORWARD": False}),
    ("remove property from closed model", obj({"a": STR, "b": INT}, closed=True),
     obj({"a": STR}, closed=True), {"BACKWARD": False, "FORWARD": True}),
    ("add required property (closed)", obj({"a": STR}, closed=True),
     obj({"a": STR, "b": INT}, ["b"], closed=True), {"BACKWARD": False, "FORWARD": False}),
    ("make existing property required", obj({"a": STR, "b": INT}), obj({"a": STR, "b": INT}, ["b"]),
     {"BACKWARD": False, "FORWARD": True}),
    ("drop a required constraint", obj({"a": STR}, ["a"]), obj({"a": STR}),
     {"BACKWARD": True, "FORWARD": False}),
    ("widen integer to number", obj({"a": INT}), obj({"a": NUM}),
     {"BACKWARD": True, "FORWARD": False}),
    ("change string to integer", obj({"a": STR}), obj({"a": INT}),
     {"BACKWARD": False, "FORWARD": False, "NONE": True}),
    ("add a type union member", obj({"a": STR}), obj({"a": {"type": ["string", "null"]}}),
     {"BACKWARD": True, "FORWARD": False}),
    ("close the content model", obj({"a": STR}), obj({"a": STR}, closed=True),
     {"BACKWARD": False, "FORWARD": True}),
    ("open the content model", obj({"a": STR}, closed=True), obj({"a": STR}),
     {"BACKWARD": True, "FORWARD": False}),
    ("extend enum", obj({"c": {"enum": ["r", "g"]}}), obj({"c": {"enum": ["r", "g", "b"]}}),
     {"BACKWARD": True, "FORWARD": False}),
    ("narrow enum", obj({"c": {"enum": ["r", "g", "b"]}}), obj({"c": {"enum": ["r", "g"]}}),
     {"BACKWARD": False, "FORWARD": True}),
    ("lower maxLength", obj({"a": {"type": "string", "maxLength": 10}}),
     obj({"a": {"type": "string", "maxLength": 5}}), {"BACKWARD": False, "FORWARD": True}),
    ("raise minimum", obj({"a": {"type": "integer", "minimum": 0}}),
     obj({"a": {"type": "integer", "minimum": 10}}), {"BACKWARD": False, "FORWARD": True}),
    ("add partially open property covered", obj({"a": STR}, additionalProperties=STR),
     obj({"a": STR, "b": STR}, additionalProperties=STR), {"BACKWARD": True}),
    ("add partially open property not covered", obj({"a": STR}, additionalProperties=STR),
     obj({"a": STR, "b": INT}, additionalProperties=STR), {"BACKWARD": False}),
    ("items type change", json.dumps({"type": "array", "items": STR}),
     json.dumps({"type": "array", "items": INT}), {"BACKWARD": False, "FORWARD": False}),
    ("oneOf extended", json.dumps({"oneOf": [STR, INT]}), json.dumps({"oneOf": [STR, INT, {"type": "null"}]}),
     {"BACKWARD": True, "FORWARD": False}),
    ("local $ref to changed definition",
     json.dumps({"type": "object", "properties": {"a": {"$ref": "#/definitions/A"}},
                 "definitions": {"A": STR}}),
     json.dumps({"type": "object", "properties": {"a": {"$ref": "#/definitions/A"}},
                 "definitions": {"A": INT}}), {"BACKWARD": False}),
]


@pytest.mark.parametrize("case,old,new,verdicts", CASES, ids=[c[0] for c in CASES])
def test_json_schema_evolution(case: str, old: str, new: str, verdicts: dict[str, bool]) -> None:
    o, n = parse("JSON", old), parse("JSON", new)
    for level, ok in verdicts.items():
        msgs = check(level, n, [(1, o)])
        assert (not msgs) == ok, f"{case} under {level}: {msgs}"


def test_messages_name_the_rule_and_path() -> None:
    o, n = parse("JSON", obj({"a": STR})), parse("JSON", obj({"a": STR, "b": INT}))
    msgs = check("BACKWARD", n, [(3, o)])
    assert msgs and "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL" in msgs[0] and "#/properties/b" in msgs[0]
    assert "oldSchemaVersion: 3" in msgs[0]


def test_reference_to_another_schema() -> None:
    dep = Dependency("address.json", "JSON", obj({"city": STR}, closed=True))
    main = json.dumps({"type": "object", "properties": {"addr": {"$ref": "address.json"}}})
    assert parse("JSON", main, [dep]).canonical() == json.dumps(json.loads(main), separators=(",", ":"))
    with pytest.raises(InvalidSchema, match="address.json"):
        parse("JSON", main)


@pytest.mark.parametrize("bad", ["{", "42", '{"type": "objekt"}', '{"properties": {"a": {"minimum": "x"}}}'])
def test_invalid_json_schema_rejected(bad: str) -> None:
    with pytest.raises(InvalidSchema):
        parse("JSON", bad)
