"""Avro evolutions per compatibility level, each with the verdict Avro's schema resolution gives."""

from __future__ import annotations

import json

import pytest

from samsa.registry.compat import check
from samsa.registry.formats import InvalidSchema, parse

pytestmark = pytest.mark.timeout(60)


def rec(*fields: dict[str, object], name: str = "User") -> str:
    return json.dumps({"type": "record", "name": name, "namespace": "t", "fields": list(fields)})


A = {"name": "a", "type": "int"}
B_OPT = {"name": "b", "type": "string", "default": ""}
B_REQ = {"name": "b", "type": "string"}
A_LONG = {"name": "a", "type": "long"}
A_STR = {"name": "a", "type": "string"}
ENUM1 = {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["X", "Y"]}}
ENUM2 = {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["X", "Y", "Z"]}}
ENUM2D = {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["X", "Y", "Z"], "default": "X"}}
NULLABLE = {"name": "c", "type": ["null", "string"], "default": None}

# (case, old, new, {level: compatible?})
CASES = [
    ("add optional field", rec(A), rec(A, B_OPT),
     {"BACKWARD": True, "FORWARD": True, "FULL": True, "NONE": True}),
    ("add required field", rec(A), rec(A, B_REQ),
     {"BACKWARD": False, "FORWARD": True, "FULL": False, "NONE": True}),
    ("remove optional field", rec(A, B_OPT), rec(A),
     {"BACKWARD": True, "FORWARD": True, "FULL": True}),
    ("remove required field", rec(A, B_REQ), rec(A),
     {"BACKWARD": True, "FORWARD": False, "FULL": False}),
    ("promote int to long", rec(A), rec(A_LONG),
     {"BACKWARD": True, "FORWARD": False, "FULL": False}),
    ("change int to string", rec(A), rec(A_STR),
     {"BACKWARD": False, "FORWARD": False, "FULL": False, "NONE": True}),
    ("add enum symbol", rec(ENUM1), rec(ENUM2),
     {"BACKWARD": True, "FORWARD": False, "FULL": False}),
    ("add enum symbol with enum default", rec(ENUM1), rec(ENUM2D),
     {"BACKWARD": True}),
    ("remove enum symbol", rec(ENUM2), rec(ENUM1),
     {"BACKWARD": False, "FORWARD": True}),
    ("add nullable union field with default", rec(A), rec(A, NULLABLE),
     {"BACKWARD": True, "FORWARD": True, "FULL": True}),
    ("rename record", rec(A), rec(A, name="Person"),
     {"BACKWARD": False, "FORWARD": False}),
    ("rename record with alias", rec(A),
     json.dumps({"type": "record", "name": "Person", "namespace": "t", "aliases": ["t.User"],
                 "fields": [A]}), {"BACKWARD": True}),
]


@pytest.mark.parametrize("case,old,new,verdicts", CASES, ids=[c[0] for c in CASES])
def test_avro_evolution(case: str, old: str, new: str, verdicts: dict[str, bool]) -> None:
    o, n = parse("AVRO", old), parse("AVRO", new)
    for level, ok in verdicts.items():
        msgs = check(level, n, [(1, o)])
        assert (not msgs) == ok, f"{case} under {level}: {msgs}"


def test_transitive_levels_check_every_version() -> None:
    v1 = parse("AVRO", rec(A))
    v2 = parse("AVRO", rec(A, B_OPT))
    v3 = parse("AVRO", rec(A, {"name": "b", "type": "int", "default": 0}))  # b re-typed
    assert check("BACKWARD", v3, [(1, v1), (2, v2)]) != []  # v3 can't read v2's string b
    v3b = parse("AVRO", rec(A, {"name": "d", "type": "string"}))  # required field added
    assert check("FORWARD", v3b, [(1, v1), (2, v2)]) == []
    # b removed in v3c: v1 (no b) fine, v2 has b with default -> FORWARD ok; BACKWARD_TRANSITIVE
    # vs FORWARD_TRANSITIVE: old readers of v1 read v3c's data (fine)
    v3c = parse("AVRO", rec(A))
    assert check("FULL_TRANSITIVE", v3c, [(1, v1), (2, v2)]) == []
    v4 = parse("AVRO", rec(A_STR))
    assert check("BACKWARD_TRANSITIVE", v4, [(1, v1), (2, v2), (3, v3c)]) != []


def test_transitive_catches_what_latest_only_misses() -> None:
    v1 = parse("AVRO", rec(A, B_REQ))
    v2 = parse("AVRO", rec(A))
    v3 = parse("AVRO", rec(A, {"name": "b", "type": "int", "default": 0}))
    assert check("BACKWARD", v3, [(1, v1), (2, v2)]) == []
    assert check("BACKWARD_TRANSITIVE", v3, [(1, v1), (2, v2)]) != []


@pytest.mark.parametrize("bad", [
    "{not json", '{"type":"recrd","name":"X"}', '{"type":"record","name":"X"}',
    '{"type":"record","name":"X","fields":[{"name":"a","type":"int","default":"x"}]}',
    '{"type":"enum","name":"E","symbols":["A","A"]}', '"nosuchtype"',
])
def test_invalid_avro_rejected(bad: str) -> None:
    with pytest.raises(InvalidSchema):
        parse("AVRO", bad)


def test_canonical_form_ignores_whitespace() -> None:
    a = parse("AVRO", rec(A))
    b = parse("AVRO", json.dumps(json.loads(rec(A)), indent=4))
    assert a.canonical() == b.canonical()
