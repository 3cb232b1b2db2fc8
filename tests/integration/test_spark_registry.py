"""samsa.spark.registry_decode: schema-registry framed Avro, JSON Schema and Protobuf payloads
(written by confluent-kafka's serializers) decode into typed Spark struct columns, the schema looked
up by the id in each record's header."""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from samsa.testing import SamsaBroker
from samsa.testing.registry import InProcessRegistry

pytest.importorskip("pyspark")
from pyspark.sql import SparkSession  # noqa: E402

from samsa.spark.registry_decode import (  # noqa: E402
    from_avro,
    from_json_schema,
    from_protobuf,
    split_frame,
)

pytestmark = pytest.mark.timeout(300)

USER = {"type": "record", "name": "User", "namespace": "app", "fields": [
    {"name": "name", "type": "string"}, {"name": "age", "type": "int"},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "email", "type": ["null", "string"], "default": None}]}
USER_JSON = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                                              "score": {"type": "number"}}}
PROTO = """syntax = "proto3";
package sparkshop;
message Order {
  string id = 1;
  int64 cents = 2;
  message Line { string sku = 1; int32 qty = 2; }
  repeated Line lines = 3;
  map<string, string> labels = 4;
}
"""



@pytest.fixture(scope="module")
def registry(samsa_broker: SamsaBroker) -> Iterator[InProcessRegistry]:
    with InProcessRegistry(samsa_broker.bootstrap) as r:
        yield r


@pytest.fixture(scope="module")
def order_pb2(tmp_path_factory: pytest.TempPathFactory) -> Any:
    import grpc_tools
    from grpc_tools import protoc
    d: Path = tmp_path_factory.mktemp("proto")
    (d / "spark_shop_order.proto").write_text(PROTO)
    inc = str(Path(grpc_tools.__file__).parent / "_proto")
    assert protoc.main(["protoc", f"-I{d}", f"-I{inc}", f"--python_out={d}", "spark_shop_order.proto"]) == 0
    sys.path.insert(0, str(d))
    try:
        return importlib.import_module("spark_shop_order_pb2")
    finally:
        sys.path.remove(str(d))


def test_decode_avro_json_protobuf(spark: SparkSession, registry: InProcessRegistry, order_pb2: Any) -> None:
    client = SchemaRegistryClient({"url": registry.url})
    avro = AvroSerializer(client, json.dumps(USER))
    ctx = SerializationContext("users", MessageField.VALUE)
    users = [{"name": f"u{i}", "age": 20 + i, "tags": ["a"] * i, "email": None if i % 2 else f"u{i}@x"}
             for i in range(5)]
    rows = [(avro(u, ctx),) for u in users] + [(None,)]
    df = spark.createDataFrame(rows, "value binary")
    decoded = df.select(from_avro("value", registry.url, subject="users-value").alias("u"))
    got = [r.u for r in decoded.collect()]
    assert [g.asDict() if g else None for g in got] == [*users, None]

    js = JSONSerializer(json.dumps(USER_JSON), client)
    jctx = SerializationContext("scores", MessageField.VALUE)
    docs = [{"name": f"s{i}", "age": i, "score": i / 2} for i in range(3)]
    jdf = spark.createDataFrame([(js(d, jctx),) for d in docs], "value binary")
    out = jdf.select(from_json_schema("value", registry.url, subject="scores-value").alias("s"))
    assert str(out.schema["s"].dataType.simpleString()) == "struct<name:string,age:bigint,score:double>"
    assert [r.s.asDict() for r in out.collect()] == docs

    ps = ProtobufSerializer(order_pb2.Order, client, {"use.deprecated.format": False})
    pctx = SerializationContext("orders", MessageField.VALUE)
    orders = []
    for i in range(3):
        o = order_pb2.Order(id=f"o{i}", cents=100 * i)
        o.lines.add(sku=f"sku{i}", qty=i + 1)
        o.labels["channel"] = "web"
        orders.append(ps(o, pctx))
    assert split_frame(orders[0], protobuf=True)[1] == [0]
    pdf = spark.createDataFrame([(b,) for b in orders] + [(b"\x01junk",)], "value binary")
    res = pdf.select(from_protobuf("value", registry.url, subject="orders-value", mode="PERMISSIVE")
                     .alias("o")).collect()
    assert res[3].o is None  # PERMISSIVE: not in the wire format -> null
    first = res[1].o.asDict(recursive=True)
    assert first == {"id": "o1", "cents": 100, "lines": [{"sku": "sku1", "qty": 2}],
                     "labels": {"channel": "web"}}
    with pytest.raises(Exception, match="wire format"):
        pdf.select(from_protobuf("value", registry.url, subject="orders-value")).collect()
