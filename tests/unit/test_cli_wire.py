"""The raw-protocol helpers of `samsa transactions` (samsa/cli/_wire.py): the hand decoder of
DescribeTransactions v0 (kio cannot decode Kafka's -1 start time) agrees with kio's writer."""

from __future__ import annotations

import datetime
import io
import struct
from typing import Any

import pytest
from kio.index import load_response_schema
from kio.serial import entity_reader, entity_writer

from samsa.cli._common import CliError, UsageError
from samsa.cli._wire import (
    DESCRIBE_TRANSACTIONS,
    TxnTopic,
    error_name,
    millis,
    parse_address,
    read_describe_transactions_v0,
)
from samsa.protocol.codec import build

START_MS = 1_700_000_000_123


def encode(states: list[dict[str, Any]]) -> bytes:
    cls = load_response_schema(DESCRIBE_TRANSACTIONS, 0)
    out = io.BytesIO()
    entity_writer(cls)(out, build(cls, {"throttle_time": 7, "transaction_states": states}))
    return out.getvalue()


def state(tid: str, start: int, topics: list[dict[str, Any]]) -> dict[str, Any]:
    return {"error_code": 0, "transactional_id": tid, "transaction_state": "Ongoing",
            "transaction_timeout": 60000, "transaction_start_time": start, "producer_id": 4000000000,
            "producer_epoch": 3, "topics": topics}


def test_decoder_agrees_with_kio() -> None:
    data = encode([state("app-é", START_MS, [{"topic": "orders", "partitions": [0, 2]},
                                             {"topic": "x", "partitions": []}]),
                   state("b", START_MS + 1, [])])
    kio_resp, _ = entity_reader(load_response_schema(DESCRIBE_TRANSACTIONS, 0))(data, 0)
    ours = read_describe_transactions_v0(data)
    assert ours.throttle_time == 7
    assert len(ours.transaction_states) == len(kio_resp.transaction_states) == 2
    for a, k in zip(ours.transaction_states, kio_resp.transaction_states, strict=True):
        assert a.transactional_id == k.transactional_id
        assert a.transaction_state == k.transaction_state
        assert a.transaction_timeout == millis(k.transaction_timeout) == 60000
        assert a.transaction_start_time == millis(k.transaction_start_time)
        assert (a.producer_id, a.producer_epoch) == (k.producer_id, k.producer_epoch) == (4000000000, 3)
        assert a.topics == tuple(TxnTopic(t.topic, tuple(t.partitions)) for t in k.topics)
    assert ours.transaction_states[0].transaction_start_time == START_MS
    assert ours.transaction_states[0].topics == (TxnTopic("orders", (0, 2)), TxnTopic("x", ()))


def test_decoder_reads_minus_one_start_time_that_kio_rejects() -> None:
    data = encode([state("empty", START_MS, [])]).replace(struct.pack(">q", START_MS),
                                                          struct.pack(">q", -1))
    with pytest.raises(Exception, match="negative"):
        entity_reader(load_response_schema(DESCRIBE_TRANSACTIONS, 0))(data, 0)
    assert read_describe_transactions_v0(data).transaction_states[0].transaction_start_time == -1


def test_decoder_skips_tagged_fields() -> None:
    # a response whose top level carries one tagged field (tag 5, 3 bytes) after the array
    data = encode([])
    assert data.endswith(b"\x00")
    tagged = data[:-1] + b"\x01\x05\x03abc"
    assert read_describe_transactions_v0(tagged).transaction_states == ()


def test_small_helpers() -> None:
    assert error_name(105) == "TRANSACTIONAL_ID_NOT_FOUND"
    assert error_name(0) == "NONE"
    assert error_name(31999) == "error code 31999"
    assert millis(datetime.timedelta(seconds=1.5)) == 1500
    assert millis(datetime.datetime.fromtimestamp(START_MS / 1000, datetime.UTC)) == START_MS
    assert millis(None) == -1
    assert parse_address("127.0.0.1:9092") == ("127.0.0.1", 9092)
    assert parse_address("[::1]:9092") == ("::1", 9092)
    for bad in ("localhost", ":9092", "host:port"):
        with pytest.raises(UsageError):
            parse_address(bad)
    assert issubclass(UsageError, CliError)
