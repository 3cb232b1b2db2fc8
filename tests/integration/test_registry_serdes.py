"""confluent-kafka's SchemaRegistryClient and its Avro, JSON Schema and Protobuf serializers against
Samsa's registry and broker: auto-registration, use.latest.version and schema references."""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from samsa.testing import SamsaBroker
from samsa.testing.registry import InProcessRegistry

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def registry(samsa_broker: SamsaBroker) -> Iterator[InProcessRegistry]:
    with InProcessRegistry(samsa_broker.bootstrap) as r:
        yield r


@pytest.fixture(scope="module")
def client(registry: InProcessRegistry) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": registry.url})


def roundtrip(bootstrap: str, topic: str, values: list[bytes]) -> list[bytes]:
    p = Producer({"bootstrap.servers": bootstrap})
    errors: list[Any] = []
    for v in values:
        p.produce(topic, value=v, on_delivery=lambda e, m: errors.append(e) if e else None)
    assert p.flush(20) == 0 and not errors, errors
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    from confluent_kafka import TopicPartition
    c.assign([TopicPartition(topic, 0, 0)])
    out: list[bytes] = []
    import time
    deadline = time.monotonic() + 20
    while len(out) < len(values) and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            out.append(m.value())
    c.close()
    return out


USER = {"type": "record", "name": "User", "namespace": "app",
        "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}]}


def test_avro_auto_register_roundtrip(samsa_broker: SamsaBroker, client: SchemaRegistryClient) -> None:
    ser = AvroSerializer(client, json.dumps(USER))
    de = AvroDeserializer(client)
    ctx = SerializationContext("avro-users", MessageField.VALUE)
    raw = [ser({"name": f"u{i}", "age": i}, ctx) for i in range(5)]
    assert raw[0][0] == 0
    got = roundtrip(samsa_broker.bootstrap, "avro-users", raw)
    assert [de(v, ctx) for v in got] == [{"name": f"u{i}", "age": i} for i in range(5)]
    latest = client.get_latest_version("avro-users-value")
    assert latest.version == 1 and json.loads(latest.schema.schema_str) == USER


def test_avro_use_latest_version_and_evolution(samsa_broker: SamsaBroker,
                                               client: SchemaRegistryClient) -> None:
    v2 = dict(USER, fields=USER["fields"] + [{"name": "email", "type": ["null", "string"],  # type: ignore[operator]
                                               "default": None}])
    client.register_schema("avro-latest-value", Schema(json.dumps(USER), "AVRO"))
    sid2 = client.register_schema("avro-latest-value", Schema(json.dumps(v2), "AVRO"))
    ser = AvroSerializer(client, None, conf={"auto.register.schemas": False, "use.latest.version": True})
    ctx = SerializationContext("avro-latest", MessageField.VALUE)
    raw = ser({"name": "x", "age": 1, "email": "x@y"}, ctx)
    assert int.from_bytes(raw[1:5], "big") == sid2
    got = roundtrip(samsa_broker.bootstrap, "avro-latest", [raw])
    assert AvroDeserializer(client)(got[0], ctx) == {"name": "x", "age": 1, "email": "x@y"}


def test_avro_references(samsa_broker: SamsaBroker, client: SchemaRegistryClient) -> None:
    addr = {"type": "record", "name": "Address", "namespace": "app",
            "fields": [{"name": "city", "type": "string"}]}
    client.register_schema("app.Address", Schema(json.dumps(addr), "AVRO"))
    person = {"type": "record", "name": "Person", "namespace": "app",
              "fields": [{"name": "name", "type": "string"}, {"name": "home", "type": "app.Address"}]}
    refs = [SchemaReference("app.Address", "app.Address", 1)]
    sid = client.register_schema("people-value", Schema(json.dumps(person), "AVRO", refs))
    assert client.get_schema(sid).references[0].subject == "app.Address"
    ser = AvroSerializer(client, None, conf={"auto.register.schemas": False, "use.latest.version": True})
    ctx = SerializationContext("people", MessageField.VALUE)
    raw = ser({"name": "p", "home": {"city": "Prague"}}, ctx)
    got = roundtrip(samsa_broker.bootstrap, "people", [raw])
    assert AvroDeserializer(client)(got[0], ctx) == {"name": "p", "home": {"city": "Prague"}}
    addr_id = client.get_latest_version("app.Address").schema_id
    assert sid != addr_id
    assert client.get_referenced_by("app.Address", 1) == [sid]


ORDER_JSON = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
              "properties": {"id": {"type": "string"}, "qty": {"type": "integer"}},
              "required": ["id"], "additionalProperties": False}


def test_json_schema_roundtrip_and_use_latest(samsa_broker: SamsaBroker,
                                              client: SchemaRegistryClient) -> None:
    ser = JSONSerializer(json.dumps(ORDER_JSON), client)
    ctx = SerializationContext("json-orders", MessageField.VALUE)
    raw = [ser({"id": f"o{i}", "qty": i}, ctx) for i in range(3)]
    got = roundtrip(samsa_broker.bootstrap, "json-orders", raw)
    de = JSONDeserializer(None, schema_registry_client=client)
    assert [de(v, ctx) for v in got] == [{"id": f"o{i}", "qty": i} for i in range(3)]
    # an added optional property is backward compatible for a closed model
    v2 = dict(ORDER_JSON, properties={**ORDER_JSON["properties"], "note": {"type": "string"}})  # type: ignore[dict-item]
    client.register_schema("json-orders-value", Schema(json.dumps(v2), "JSON"))
    ser2 = JSONSerializer(None, client, conf={"auto.register.schemas": False, "use.latest.version": True})
    raw2 = ser2({"id": "z", "note": "hi"}, ctx)
    assert de(roundtrip(samsa_broker.bootstrap, "json-orders", [raw2])[-1], ctx) in (
        {"id": "z", "note": "hi"}, {"id": "o0", "qty": 0})


MONEY_PROTO = """syntax = "proto3";
package shop;
message Money { int64 cents = 1; string currency = 2; }
"""
ORDER_PROTO = """syntax = "proto3";
package shop;
import "money.proto";
import "google/protobuf/timestamp.proto";
message Order { string id = 1; Money total = 2; google.protobuf.Timestamp at = 3; }
"""


@pytest.fixture(scope="module")
def order_pb2(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Generate Python classes for order.proto (which imports money.proto) with protoc."""
    import grpc_tools
    from grpc_tools import protoc
    d: Path = tmp_path_factory.mktemp("proto")
    (d / "money.proto").write_text(MONEY_PROTO)
    (d / "order.proto").write_text(ORDER_PROTO)
    inc = str(Path(grpc_tools.__file__).parent / "_proto")
    args = ["protoc", f"-I{d}", f"-I{inc}", f"--python_out={d}", "money.proto", "order.proto"]
    assert protoc.main(args) == 0
    sys.path.insert(0, str(d))
    try:
        return importlib.import_module("order_pb2")
    finally:
        sys.path.remove(str(d))


def test_protobuf_with_import_reference(samsa_broker: SamsaBroker, client: SchemaRegistryClient,
                                        order_pb2: Any) -> None:
    ser = ProtobufSerializer(order_pb2.Order, client, {"use.deprecated.format": False})
    de = ProtobufDeserializer(order_pb2.Order, {"use.deprecated.format": False})
    ctx = SerializationContext("proto-orders", MessageField.VALUE)
    msgs = []
    for i in range(3):
        m = order_pb2.Order(id=f"o{i}")
        m.total.cents = 100 * i
        m.total.currency = "EUR"
        m.at.seconds = 1700000000 + i
        msgs.append(m)
    raw = [ser(m, ctx) for m in msgs]
    got = roundtrip(samsa_broker.bootstrap, "proto-orders", raw)
    assert [de(v, ctx) for v in got] == msgs
    latest = client.get_latest_version("proto-orders-value")
    refs = latest.schema.references
    assert [(r.name, r.subject) for r in refs] == [("money.proto", "money.proto")]
    assert client.get_latest_version("money.proto").schema.schema_type == "PROTOBUF"
    # use.latest.version + a deserializer that resolves references from the registry
    ser2 = ProtobufSerializer(order_pb2.Order, client, {"use.deprecated.format": False,
                                                        "auto.register.schemas": False,
                                                        "use.latest.version": True})
    raw2 = ser2(msgs[0], ctx)
    assert int.from_bytes(raw2[1:5], "big") == latest.schema_id
    # registering the same schema as .proto text gives the same id
    text = Schema(ORDER_PROTO, "PROTOBUF", [SchemaReference("money.proto", "money.proto", 1)])
    assert client.register_schema("proto-orders-value", text) == latest.schema_id
    assert client.get_versions("proto-orders-value") == [1]


def test_protobuf_incompatible_change_rejected(client: SchemaRegistryClient) -> None:
    from confluent_kafka.schema_registry.error import SchemaRegistryError
    client.register_schema("proto-evolve", Schema(MONEY_PROTO, "PROTOBUF"))
    bad = MONEY_PROTO.replace("string currency = 2", "int64 currency = 2")
    with pytest.raises(SchemaRegistryError) as e:
        client.register_schema("proto-evolve", Schema(bad, "PROTOBUF"))
    assert e.value.http_status_code == 409
    assert ("FIELD_KIND_CHANGED" in e.value.error_message
            or "FIELD_SCALAR_KIND_CHANGED" in e.value.error_message), e.value.error_message
    ok = MONEY_PROTO.replace("}", "string note = 3; }")
    assert client.register_schema("proto-evolve", Schema(ok, "PROTOBUF")) > 0
    assert client.test_compatibility("proto-evolve", Schema(bad, "PROTOBUF")) is False
