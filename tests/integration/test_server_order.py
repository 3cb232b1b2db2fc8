"""Responses leave in request order on every path, including the ones answered without a handler."""

from __future__ import annotations

import struct

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.testing import SamsaBroker
from tests.wire import Wire

pytestmark = pytest.mark.timeout(60)


def test_unsupported_api_versions_answer_waits_behind_a_parked_fetch(
        samsa_broker: SamsaBroker) -> None:
    """A long-polling Fetch, then ApiVersions v99 pipelined behind it: the error-35 answer must not
    overtake the fetch's response (clients match responses to requests by order)."""
    a = AdminClient({"bootstrap.servers": samsa_broker.bootstrap})
    a.create_topics([NewTopic("order-av", 1, 1)])["order-av"].result(10)
    w = Wire(samsa_broker.bootstrap)
    fetch = {"replica_id": -1, "max_wait": 1500, "min_bytes": 1, "max_bytes": 1 << 20,
             "isolation_level": 0,
             "topics": [{"topic": "order-av", "partitions": [
                 {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]}
    frame = w.encode(1, 11, fetch)  # correlation id 1, parks (empty log, min_bytes 1)
    body = struct.pack(">hhih", 18, 99, 77, 1) + b"x"
    w.send_raw(frame + struct.pack(">i", len(body)) + body)
    first, second = w.recv_frame(), w.recv_frame()
    assert struct.unpack_from(">i", first)[0] == w.corr
    assert struct.unpack_from(">ih", second) == (77, 35)
