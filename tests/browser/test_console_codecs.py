"""Values framed by Confluent's own serializers (Avro, JSON Schema) are shown decoded by the
console, and values the console's produce form encodes are read back by Confluent's
deserializers: the registry wire format both ways."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

AVRO = json.dumps({"type": "record", "name": "Payment", "fields": [
    {"name": "id", "type": "string"}, {"name": "cents", "type": "long"},
    {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["CARD", "CASH"]}}]})
JSON_SCHEMA = json.dumps({"type": "object", "properties": {
    "city": {"type": "string"}, "people": {"type": "integer"}}, "required": ["city"]})


@pytest.fixture(scope="module")
def env(stack: dict[str, Any]) -> Iterator[dict[str, Any]]:
    bs = stack["broker"].bootstrap
    admin = AdminClient({"bootstrap.servers": bs})
    for t in ("payments", "cities"):
        admin.create_topics([NewTopic(t, 1, 1)])[t].result(20)
    with httpx.Client(base_url=stack["console"], timeout=30) as http:
        yield {**stack, "http": http, "sr": SchemaRegistryClient({"url": stack["registry"]})}


def _values(page: str) -> list[tuple[str, str]]:
    """(kind, shown text) of each value cell on a messages page."""
    cells = re.findall(r'<td><span class="kind ([a-z-]+)"[^>]*>[a-z-]+</span><pre>(.*?)</pre>', page, re.S)
    return cells[1::2]  # key, value, key, value...


def test_confluent_serialized_values_are_decoded(env: dict[str, Any]) -> None:
    p = Producer({"bootstrap.servers": env["broker"].bootstrap})
    avro = AvroSerializer(env["sr"], AVRO)
    p.produce("payments", value=avro({"id": "p1", "cents": 250, "kind": "CASH"},
                                     SerializationContext("payments", MessageField.VALUE)))
    js = JSONSerializer(JSON_SCHEMA, env["sr"])
    p.produce("cities", value=js({"city": "Praha", "people": 1300000},
                                 SerializationContext("cities", MessageField.VALUE)))
    assert p.flush(15) == 0
    shown = _values(env["http"].get("/topics/payments/messages?mode=beginning").text)
    assert shown[0][0] == "avro"
    assert json.loads(shown[0][1].replace("&quot;", '"')) == {"id": "p1", "cents": 250, "kind": "CASH"}
    shown = _values(env["http"].get("/topics/cities/messages?mode=beginning").text)
    assert shown[0][0] == "json-schema"
    assert json.loads(shown[0][1].replace("&quot;", '"')) == {"city": "Praha", "people": 1300000}


def test_form_encoded_values_read_by_confluent_deserializers(env: dict[str, Any]) -> None:
    http = env["http"]
    r = http.post("/topics/payments/produce?subject=payments-value",
                  data={"f.id": "p2", "f.cents": "99", "f.kind": "CARD",
                        "kinds": json.dumps([{"name": "id", "kind": "string"},
                                             {"name": "cents", "kind": "integer"},
                                             {"name": "kind", "kind": "enum"}])})
    assert r.status_code == 303, r.text[-800:]
    r = http.post("/topics/cities/produce?subject=cities-value", data={"raw": '{"city": "Brno"}'})
    assert r.status_code == 303, r.text[-800:]
    bad = http.post("/topics/cities/produce?subject=cities-value", data={"raw": '{"people": 3}'})
    assert bad.status_code == 400 and "does not fit the JSON schema" in bad.text
    c = Consumer({"bootstrap.servers": env["broker"].bootstrap, "group.id": "codec-check",
                  "auto.offset.reset": "earliest"})
    c.subscribe(["payments", "cities"])
    got: dict[str, list[bytes]] = {"payments": [], "cities": []}
    for _ in range(60):
        for m in c.consume(10, 0.5):
            if m.error() is None:
                got[m.topic()].append(m.value())
        if len(got["payments"]) >= 2 and len(got["cities"]) >= 2:
            break
    c.close()
    avro = AvroDeserializer(env["sr"])
    assert avro(got["payments"][1], SerializationContext("payments", MessageField.VALUE)) == \
        {"id": "p2", "cents": 99, "kind": "CARD"}
    js = JSONDeserializer(JSON_SCHEMA, schema_registry_client=env["sr"])
    assert js(got["cities"][1], SerializationContext("cities", MessageField.VALUE)) == {"city": "Brno"}
