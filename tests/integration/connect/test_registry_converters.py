"""The registry converters against a real Samsa broker and registry, interoperating both ways with
confluent-kafka's serializers: bytes one writes (through a topic) the other reads."""

from __future__ import annotations

import datetime
import decimal
import importlib
import json
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from samsa.connect.converters.avro import AvroConverter
from samsa.connect.converters.json_schema import JsonSchemaConverter
from samsa.connect.converters.protobuf import ProtobufConverter
from samsa.connect.converters.protobuf_data import connect_to_proto
from samsa.connect.data import (
    BOOLEAN_SCHEMA,
    FLOAT64_SCHEMA,
    INT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    Struct,
    Type,
    array_schema,
    date_schema,
    decimal_schema,
    map_schema,
    struct_schema,
    timestamp_schema,
)
from samsa.connect.errors import DataException
from samsa.testing import SamsaBroker
from samsa.testing.registry import InProcessRegistry

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def registry(samsa_broker: SamsaBroker) -> Iterator[InProcessRegistry]:
    with InProcessRegistry(samsa_broker.bootstrap) as r:
        yield r


@pytest.fixture(scope="module")
def client(registry: InProcessRegistry) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": registry.url})


def through_topic(bootstrap: str, topic: str, values: list[bytes]) -> list[bytes]:
    """Produce the values to a fresh topic and consume them back (bytes as stored)."""
    p = Producer({"bootstrap.servers": bootstrap})
    errors: list[Any] = []
    for v in values:
        p.produce(topic, value=v, on_delivery=lambda e, m: errors.append(e) if e else None)
    assert p.flush(20) == 0 and not errors, errors
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4()}",
                  "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, 0, 0)])
    out: list[bytes] = []
    deadline = time.monotonic() + 20
    while len(out) < len(values) and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            out.append(m.value())
    c.close()
    assert len(out) == len(values)
    return out


def configured(cls: type, registry: InProcessRegistry, **extra: str) -> Any:
    conv = cls()
    conv.configure({"schema.registry.url": registry.url, **extra}, False)
    return conv


ITEM = struct_schema([("sku", STRING_SCHEMA), ("qty", INT32_SCHEMA)], name="conntest.Item")
ORDER = struct_schema([
    ("id", STRING_SCHEMA), ("total", FLOAT64_SCHEMA), ("paid", BOOLEAN_SCHEMA),
    ("note", OPTIONAL_STRING_SCHEMA), ("items", array_schema(ITEM)),
    ("attrs", map_schema(STRING_SCHEMA, INT64_SCHEMA)), ("at", timestamp_schema()),
], name="conntest.Order")
AT = datetime.datetime(2024, 5, 6, 7, 8, 9, 10000, tzinfo=datetime.UTC)


def order(i: int) -> Struct:
    return Struct(ORDER, {"id": f"o{i}", "total": 10.5 * i, "paid": i % 2 == 0,
                          "note": None if i % 2 else f"n{i}",
                          "items": [Struct(ITEM, {"sku": "s1", "qty": i})],
                          "attrs": {"a": i}, "at": AT})


# ---- Avro ----------------------------------------------------------------------------------------
AVRO_USER = {"type": "record", "name": "User", "namespace": "app", "fields": [
    {"name": "name", "type": "string"}, {"name": "age", "type": "int"},
    {"name": "email", "type": ["null", "string"], "default": None},
    {"name": "born", "type": {"type": "int", "logicalType": "date"}},
    {"name": "balance", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10,
                                 "scale": 2}},
    {"name": "seen", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}


def test_avro_converter_output_read_by_confluent(samsa_broker: SamsaBroker, registry: InProcessRegistry,
                                                 client: SchemaRegistryClient) -> None:
    conv = configured(AvroConverter, registry)
    raw = [conv.from_connect_data("avro-conv-out", ORDER, order(i)) for i in range(3)]
    assert all(r is not None and r[0] == 0 for r in raw)
    got = through_topic(samsa_broker.bootstrap, "avro-conv-out", raw)  # type: ignore[arg-type]
    ctx = SerializationContext("avro-conv-out", MessageField.VALUE)
    de = AvroDeserializer(client)
    first = de(got[0], ctx)
    assert first["id"] == "o0" and first["note"] == "n0" and first["items"] == [{"sku": "s1", "qty": 0}]
    assert first["attrs"] == {"a": 0} and first["at"] == AT
    latest = client.get_latest_version("avro-conv-out-value")
    schema = json.loads(latest.schema.schema_str)
    assert schema["name"] == "Order" and schema["namespace"] == "conntest"
    assert int.from_bytes(got[0][1:5], "big") == latest.schema_id
    # the converter reads its own bytes back to the same Connect data
    assert [conv.to_connect_data("avro-conv-out", g).value for g in got] == [order(i) for i in range(3)]


def test_confluent_avro_read_by_converter(samsa_broker: SamsaBroker, registry: InProcessRegistry,
                                          client: SchemaRegistryClient) -> None:
    ser = AvroSerializer(client, json.dumps(AVRO_USER))
    ctx = SerializationContext("avro-conv-in", MessageField.VALUE)
    records = [{"name": f"u{i}", "age": i, "email": None if i else "x@y",
                "born": datetime.date(2000, 1, 1 + i), "balance": decimal.Decimal(f"{i}.25"),
                "seen": AT} for i in range(3)]
    got = through_topic(samsa_broker.bootstrap, "avro-conv-in", [ser(r, ctx) for r in records])
    conv = configured(AvroConverter, registry)
    values = [conv.to_connect_data("avro-conv-in", g) for g in got]
    s = values[0].schema
    assert s.name == "app.User" and s.field("email").schema.optional
    assert s.field("born").schema == date_schema()
    assert s.field("balance").schema.name == "org.apache.kafka.connect.data.Decimal"
    assert s.field("seen").schema == timestamp_schema()
    for r, sv in zip(records, values, strict=True):
        assert sv.value.as_dict() == r
    # and back out with the converter: the registry already has this schema's equivalent
    again = conv.from_connect_data("avro-conv-in", s, values[1].value)
    assert AvroDeserializer(client)(again, ctx) == records[1]


def test_avro_latest_version_and_record_name_strategy(registry: InProcessRegistry,
                                                      client: SchemaRegistryClient) -> None:
    strategy = "io.confluent.kafka.serializers.subject.RecordNameStrategy"
    conv = configured(AvroConverter, registry, **{"value.subject.name.strategy": strategy})
    raw = conv.from_connect_data("whatever", ORDER, order(1))
    assert client.get_latest_version("conntest.Order").schema_id == int.from_bytes(raw[1:5], "big")
    strict = configured(AvroConverter, registry, **{"auto.register.schemas": "false"})
    with pytest.raises(DataException):  # not registered under avro-strict-value
        strict.from_connect_data("avro-strict", ORDER, order(1))
    latest = configured(AvroConverter, registry, **{"auto.register.schemas": "false",
                                                    "use.latest.version": "true",
                                                    "value.subject.name.strategy": strategy})
    raw2 = latest.from_connect_data("other", ORDER, order(2))
    assert raw2[1:5] == raw[1:5]
    assert latest.to_connect_data("other", raw2).value == order(2)


# ---- Protobuf ------------------------------------------------------------------------------------
MONEY_PROTO = """syntax = "proto3";
package billing;
message Money { int64 cents = 1; string currency = 2; }
"""
INVOICE_PROTO = """syntax = "proto3";
package billing;
import "bill_money.proto";
import "google/protobuf/timestamp.proto";
message Invoice { string id = 1; Money total = 2; google.protobuf.Timestamp at = 3;
                  repeated string tags = 4; map<string, int32> counts = 5; }
"""


def compile_proto(d: Path, files: dict[str, str], module: str) -> Any:
    import grpc_tools
    from grpc_tools import protoc
    for name, text in files.items():
        (d / name).write_text(text)
    inc = str(Path(grpc_tools.__file__).parent / "_proto")
    assert protoc.main(["protoc", f"-I{d}", f"-I{inc}", f"--python_out={d}", *files]) == 0
    sys.path.insert(0, str(d))
    try:
        return importlib.import_module(module)
    finally:
        sys.path.remove(str(d))


def test_protobuf_converter_output_read_by_confluent(samsa_broker: SamsaBroker,
                                                     registry: InProcessRegistry,
                                                     tmp_path: Path) -> None:
    conv = configured(ProtobufConverter, registry)
    raw = [conv.from_connect_data("proto-conv-out", ORDER, order(i)) for i in range(3)]
    got = through_topic(samsa_broker.bootstrap, "proto-conv-out", raw)  # type: ignore[arg-type]
    # Python classes for the very .proto the converter registered
    text, _ = connect_to_proto(ORDER)
    pb2 = compile_proto(tmp_path, {"conv_order.proto": text}, "conv_order_pb2")
    de = ProtobufDeserializer(pb2.Order, {"use.deprecated.format": False})
    ctx = SerializationContext("proto-conv-out", MessageField.VALUE)
    msgs = [de(g, ctx) for g in got]
    assert [m.id for m in msgs] == ["o0", "o1", "o2"]
    assert msgs[1].total == 10.5 and msgs[2].note == "n2" and msgs[1].note == ""
    assert msgs[2].items[0].qty == 2 and dict(msgs[2].attrs) == {"a": 2}
    assert msgs[0].at.ToDatetime(tzinfo=datetime.UTC) == AT
    back = conv.to_connect_data("proto-conv-out", got[2]).value
    assert back.get("id") == "o2" and back.get("items")[0].get("qty") == 2 and back.get("at") == AT


def test_confluent_protobuf_with_reference_read_by_converter(samsa_broker: SamsaBroker,
                                                             registry: InProcessRegistry,
                                                             client: SchemaRegistryClient,
                                                             tmp_path: Path) -> None:
    pb2 = compile_proto(tmp_path, {"bill_money.proto": MONEY_PROTO, "invoice.proto": INVOICE_PROTO},
                        "invoice_pb2")
    ser = ProtobufSerializer(pb2.Invoice, client, {"use.deprecated.format": False})
    ctx = SerializationContext("proto-conv-in", MessageField.VALUE)
    msgs = []
    for i in range(3):
        m = pb2.Invoice(id=f"i{i}", tags=["x", "y"])
        m.total.cents = 100 * i
        m.total.currency = "EUR"
        m.at.FromDatetime(AT.replace(tzinfo=None))
        m.counts["k"] = i
        msgs.append(m)
    got = through_topic(samsa_broker.bootstrap, "proto-conv-in", [ser(m, ctx) for m in msgs])
    conv = configured(ProtobufConverter, registry)
    values = [conv.to_connect_data("proto-conv-in", g) for g in got]
    s = values[0].schema
    assert s.name == "billing.Invoice"
    assert s.field("total").schema.name == "billing.Money" and s.field("at").schema == timestamp_schema(
        optional=True)
    assert s.field("tags").schema.type is Type.ARRAY and s.field("counts").schema.type is Type.MAP
    for i, sv in enumerate(values):
        assert sv.value.get("id") == f"i{i}" and sv.value.get("tags") == ["x", "y"]
        assert sv.value.get("total").get("cents") == 100 * i
        assert sv.value.get("total").get("currency") == "EUR"
        assert sv.value.get("at") == AT and sv.value.get("counts") == {"k": i}
    # written back with the registered schema (use.latest.version), Confluent reads it
    latest = configured(ProtobufConverter, registry, **{"auto.register.schemas": "false",
                                                        "use.latest.version": "true"})
    again = latest.from_connect_data("proto-conv-in", s, values[1].value)
    assert ProtobufDeserializer(pb2.Invoice, {"use.deprecated.format": False})(again, ctx) == msgs[1]


# ---- JSON Schema ---------------------------------------------------------------------------------
ORDER_JSON = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
              "properties": {"id": {"type": "string"}, "qty": {"type": "integer"},
                             "price": {"type": "number"}, "tags": {"type": "array",
                                                                   "items": {"type": "string"}}},
              "required": ["id"], "additionalProperties": False}


def test_json_schema_converter_output_read_by_confluent(samsa_broker: SamsaBroker,
                                                        registry: InProcessRegistry,
                                                        client: SchemaRegistryClient) -> None:
    conv = configured(JsonSchemaConverter, registry)
    s = struct_schema([("id", STRING_SCHEMA), ("qty", INT32_SCHEMA), ("note", OPTIONAL_STRING_SCHEMA),
                       ("price", decimal_schema(2))], name="JOrder")
    values = [Struct(s, {"id": f"o{i}", "qty": i, "note": None,
                         "price": decimal.Decimal(f"{i}.50")}) for i in range(3)]
    raw = [conv.from_connect_data("json-conv-out", s, v) for v in values]
    got = through_topic(samsa_broker.bootstrap, "json-conv-out", raw)  # type: ignore[arg-type]
    de = JSONDeserializer(None, schema_registry_client=client)  # validates against the schema
    ctx = SerializationContext("json-conv-out", MessageField.VALUE)
    assert [de(g, ctx) for g in got] == [{"id": f"o{i}", "qty": i, "note": None, "price": i + 0.5}
                                         for i in range(3)]
    assert [conv.to_connect_data("json-conv-out", g).value for g in got] == values


def test_confluent_json_read_by_converter(samsa_broker: SamsaBroker, registry: InProcessRegistry,
                                          client: SchemaRegistryClient) -> None:
    ser = JSONSerializer(json.dumps(ORDER_JSON), client)
    ctx = SerializationContext("json-conv-in", MessageField.VALUE)
    records = [{"id": f"o{i}", "qty": i, "price": 1.5, "tags": ["t"]} for i in range(3)]
    records.append({"id": "only"})
    got = through_topic(samsa_broker.bootstrap, "json-conv-in", [ser(r, ctx) for r in records])
    conv = configured(JsonSchemaConverter, registry)
    values = [conv.to_connect_data("json-conv-in", g) for g in got]
    s = values[0].schema
    assert s.name == "Order" and not s.field("id").schema.optional and s.field("qty").schema.optional
    assert values[0].value.as_dict() == {"id": "o0", "qty": 0, "price": 1.5, "tags": ["t"]}
    assert values[3].value.as_dict() == {"id": "only", "qty": None, "price": None, "tags": None}


def test_registry_down_is_retriable(registry: InProcessRegistry) -> None:
    from samsa.connect.errors import RetriableException
    from samsa.testing import free_port
    conv = AvroConverter()
    conv.configure({"schema.registry.url": f"http://127.0.0.1:{free_port()}"}, False)
    with pytest.raises(RetriableException):
        conv.from_connect_data("t", ORDER, order(1))
