"""Schema-validated topics: with confluent.value.schema.validation (or key) the broker rejects
records that are not schema-registry framed with an id registered under the topic's subject
(INVALID_RECORD); serialized records pass; plain topics accept anything."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from samsa.protocol.records import encode_batch
from samsa.testing import SamsaBroker
from samsa.testing.registry import InProcessRegistry
from tests.wire import Wire

pytestmark = pytest.mark.timeout(120)
SCHEMA = json.dumps({"type": "record", "name": "V", "fields": [{"name": "n", "type": "int"}]})


@pytest.fixture(scope="module")
def client(samsa_broker: SamsaBroker) -> Iterator[SchemaRegistryClient]:
    with InProcessRegistry(samsa_broker.bootstrap) as r:
        yield SchemaRegistryClient({"url": r.url})


def create(bootstrap: str, topic: str, configs: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(15)


def produce(bootstrap: str, topic: str, values: list[bytes | None],
            keys: list[bytes | None] | None = None) -> list[Any]:
    """Delivery results: None for success, else the KafkaError."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "message.send.max.retries": 0})
    out: list[Any] = []
    for i, v in enumerate(values):
        p.produce(topic, value=v, key=keys[i] if keys else None, on_delivery=lambda e, m: out.append(e))
        p.flush(15)
    return out


def test_value_validation(samsa_broker: SamsaBroker, client: SchemaRegistryClient) -> None:
    b = samsa_broker.bootstrap
    create(b, "validated", {"confluent.value.schema.validation": "true"})
    create(b, "plain", {})
    ser = AvroSerializer(client, SCHEMA)
    good = ser({"n": 1}, SerializationContext("validated", MessageField.VALUE))
    sid = int.from_bytes(good[1:5], "big")
    other_id = client.register_schema("elsewhere-value", Schema(json.dumps(
        {"type": "record", "name": "W", "fields": [{"name": "s", "type": "string"}]}), "AVRO"))
    unknown = b"\x00" + (sid + 10_000).to_bytes(4, "big") + b"\x02"
    wrong_subject = b"\x00" + other_id.to_bytes(4, "big") + b"\x02"
    results = produce(b, "validated", [good, b"not framed", unknown, wrong_subject, b"\x00\x01", None])
    assert results[0] is None
    for e in results[1:5]:
        assert e is not None and e.code() == KafkaError.INVALID_RECORD, e
    assert results[5] is None  # tombstones carry no schema
    # plain topics take anything
    assert produce(b, "plain", [b"not framed", unknown]) == [None, None]


def test_error_message_says_why(samsa_broker: SamsaBroker, client: SchemaRegistryClient) -> None:
    """librdkafka hides the broker's message: read it off the raw Produce response."""
    b = samsa_broker.bootstrap
    create(b, "validated-msg", {"confluent.value.schema.validation": "true"})
    batch = encode_batch([(None, b"ok-ish", [], int(time.time() * 1000)),
                          (None, b"\x00\x00\x00\x00\x09xyz", [], int(time.time() * 1000))])
    w = Wire(b)
    try:
        resp = w.request(0, 9, {"transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
            {"name": "validated-msg", "partition_data": [{"index": 0, "records": batch}]}]})
    finally:
        w.close()
    part = resp.responses[0].partition_responses[0]
    assert part.error_code == KafkaError.INVALID_RECORD
    assert "wire format" in part.error_message and "2 record errors" in part.error_message
    assert [e.batch_index for e in part.record_errors] == [0, 1]
    assert "schema id 9 is unknown" in part.record_errors[1].batch_index_error_message


def test_key_validation_and_config_toggle(samsa_broker: SamsaBroker, client: SchemaRegistryClient) -> None:
    b = samsa_broker.bootstrap
    create(b, "validated-keys", {"confluent.key.schema.validation": "true"})
    kser = AvroSerializer(client, SCHEMA)
    key = kser({"n": 7}, SerializationContext("validated-keys", MessageField.KEY))
    res = produce(b, "validated-keys", [b"any value", b"any value"], keys=[key, b"bad key"])
    assert res[0] is None and res[1].code() == KafkaError.INVALID_RECORD
    # turning validation off takes effect at once
    admin = AdminClient({"bootstrap.servers": b})
    fs = admin.incremental_alter_configs([ConfigResource(
        "topic", "validated-keys", incremental_configs=[
            __import__("confluent_kafka.admin", fromlist=["ConfigEntry"]).ConfigEntry(
                "confluent.key.schema.validation", "false",
                incremental_operation=__import__("confluent_kafka.admin", fromlist=["AlterConfigOpType"])
                .AlterConfigOpType.SET)])])
    for f in fs.values():
        f.result(15)
    assert produce(b, "validated-keys", [b"v"], keys=[b"bad key"]) == [None]
