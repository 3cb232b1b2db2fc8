"""Protobuf evolutions per compatibility level: field numbers and wire types decide."""

from __future__ import annotations

import base64

import pytest
from google.protobuf import descriptor_pb2

from samsa.registry.compat import check
from samsa.registry.formats import Dependency, InvalidSchema, parse

pytestmark = pytest.mark.timeout(60)


def proto(body: str, package: str = "shop", syntax: str = "proto3") -> str:
    return f'syntax = "{syntax}";\npackage {package};\n{body}\n'


BASE = proto("message Order { string id = 1; int32 qty = 2; }")

CASES = [
    ("add field", BASE, proto("message Order { string id = 1; int32 qty = 2; string note = 3; }"),
     {"BACKWARD": True, "FORWARD": True, "FULL": True}),
    ("remove field", BASE, proto("message Order { string id = 1; }"),
     {"BACKWARD": True, "FORWARD": True, "FULL": True}),
    ("rename field", BASE, proto("message Order { string id = 1; int32 quantity = 2; }"),
     {"BACKWARD": True, "FULL": True}),
    ("renumber field", BASE, proto("message Order { string id = 1; int32 qty = 5; }"),
     {"BACKWARD": True}),  # wire-wise: 2 removed and 5 added, both optional
    ("renumber swaps wire types", BASE, proto("message Order { string id = 2; int32 qty = 1; }"),
     {"BACKWARD": False, "FORWARD": False, "NONE": True}),
    ("int32 to int64 (same wire type)", BASE,
     proto("message Order { string id = 1; int64 qty = 2; }"), {"BACKWARD": True, "FULL": True}),
    ("int32 to string", BASE, proto("message Order { string id = 1; string qty = 2; }"),
     {"BACKWARD": False, "FORWARD": False, "FULL": False, "NONE": True}),
    ("int32 to sint32 (zigzag)", BASE, proto("message Order { string id = 1; sint32 qty = 2; }"),
     {"BACKWARD": False}),
    ("string to bytes", BASE, proto("message Order { bytes id = 1; int32 qty = 2; }"),
     {"BACKWARD": True, "FULL": True}),
    ("int32 to enum", BASE,
     proto("enum Q { Q0 = 0; Q1 = 1; }\nmessage Order { string id = 1; Q qty = 2; }"),
     {"BACKWARD": True}),
    ("scalar to message", BASE,
     proto("message Qty { int32 v = 1; }\nmessage Order { string id = 1; Qty qty = 2; }"),
     {"BACKWARD": False}),
    ("singular to repeated int", BASE, proto("message Order { string id = 1; repeated int32 qty = 2; }"),
     {"BACKWARD": False}),
    ("singular to repeated string", BASE, proto("message Order { repeated string id = 1; int32 qty = 2; }"),
     {"BACKWARD": True}),
    ("remove message", proto("message Order { string id = 1; }\nmessage Line { int32 n = 1; }"),
     proto("message Order { string id = 1; }"), {"BACKWARD": False, "FORWARD": True}),
    ("add message", proto("message Order { string id = 1; }"),
     proto("message Order { string id = 1; }\nmessage Line { int32 n = 1; }"),
     {"BACKWARD": True, "FORWARD": False}),
    ("rename message", BASE, proto("message Purchase { string id = 1; int32 qty = 2; }"),
     {"BACKWARD": False, "FORWARD": False}),
    ("change package", BASE, proto("message Order { string id = 1; int32 qty = 2; }", package="shop2"),
     {"BACKWARD": False, "NONE": True}),
    ("add enum value", proto("enum S { A = 0; B = 1; }\nmessage Order { S s = 1; }"),
     proto("enum S { A = 0; B = 1; C = 2; }\nmessage Order { S s = 1; }"),
     {"BACKWARD": True, "FORWARD": True, "FULL": True}),
    ("remove enum value", proto("enum S { A = 0; B = 1; C = 2; }\nmessage Order { S s = 1; }"),
     proto("enum S { A = 0; B = 1; }\nmessage Order { S s = 1; }"),
     {"BACKWARD": True, "FULL": True}),  # proto3 enums are open
    ("move one field into a new oneof", BASE,
     proto("message Order { oneof ref { string id = 1; } int32 qty = 2; }"), {"BACKWARD": True}),
    ("move two fields into a new oneof", BASE,
     proto("message Order { oneof ref { string id = 1; int32 qty = 2; } }"), {"BACKWARD": False}),
    ("move a field into an existing oneof",
     proto("message Order { oneof ref { string id = 1; } int32 qty = 2; }"),
     proto("message Order { oneof ref { string id = 1; int32 qty = 2; } }"), {"BACKWARD": False}),
    ("remove a field of a oneof",
     proto("message Order { oneof ref { string id = 1; int32 num = 3; } int32 qty = 2; }"),
     proto("message Order { oneof ref { string id = 1; } int32 qty = 2; }"), {"BACKWARD": False}),
    ("add oneof field", proto("message Order { oneof ref { string id = 1; } }"),
     proto("message Order { oneof ref { string id = 1; int32 num = 3; } }"),
     {"BACKWARD": True}),
    ("proto2 add required", proto("message Order { optional string id = 1; }", syntax="proto2"),
     proto("message Order { optional string id = 1; required int32 qty = 2; }", syntax="proto2"),
     {"BACKWARD": False, "FORWARD": False}),  # Confluent: required fields are neither added nor removed
    ("proto2 remove required", proto("message Order { required string id = 1; }", syntax="proto2"),
     proto("message Order { optional int32 x = 2; }", syntax="proto2"),
     {"BACKWARD": False}),
    ("nested message field type change", proto("message Order { message L { int32 n = 1; } L l = 1; }"),
     proto("message Order { message L { string n = 1; } L l = 1; }"), {"BACKWARD": False}),
    ("comments and whitespace only", BASE,
     "// a comment\n" + proto("message   Order {\n  string id = 1;  // id\n  int32 qty = 2;\n}"),
     {"FULL_TRANSITIVE": True}),
]


@pytest.mark.parametrize("case,old,new,verdicts", CASES, ids=[c[0] for c in CASES])
def test_protobuf_evolution(case: str, old: str, new: str, verdicts: dict[str, bool]) -> None:
    o, n = parse("PROTOBUF", old), parse("PROTOBUF", new)
    for level, ok in verdicts.items():
        msgs = check(level, n, [(1, o)])
        assert (not msgs) == ok, f"{case} under {level}: {msgs}"


def test_text_and_base64_descriptor_are_the_same_schema() -> None:
    text = parse("PROTOBUF", BASE)
    fdp = descriptor_pb2.FileDescriptorProto()
    fdp.ParseFromString(base64.b64decode(text.serialized()))  # type: ignore[attr-defined]
    fdp.name = "order.proto"
    b64 = base64.b64encode(fdp.SerializeToString()).decode()
    other = parse("PROTOBUF", b64)
    assert other.identity() == text.identity()


def test_imports_resolve_through_references_and_well_known_types() -> None:
    dep = Dependency("common/money.proto", "PROTOBUF",
                     proto("message Money { int64 cents = 1; string currency = 2; }", package="common"))
    main = proto('import "common/money.proto";\nimport "google/protobuf/timestamp.proto";\n'
                 "message Order { common.Money total = 1; google.protobuf.Timestamp at = 2; }")
    s = parse("PROTOBUF", main, [dep])
    assert s.canonical() == main
    with pytest.raises(InvalidSchema, match="money"):
        parse("PROTOBUF", main)


@pytest.mark.parametrize("bad", [
    "syntax = \"proto3\"; message A { strin a = 1; }",
    "syntax = \"proto3\"; message A { int32 a = 1; int32 b = 1; }",
    "this is not protobuf",
    "syntax = \"proto3\"; message A { int32 a = 0; }",
])
def test_invalid_protobuf_rejected_with_protoc_message(bad: str) -> None:
    with pytest.raises(InvalidSchema) as e:
        parse("PROTOBUF", bad)
    assert "Invalid Protobuf schema" in str(e.value) and len(str(e.value)) > 30
